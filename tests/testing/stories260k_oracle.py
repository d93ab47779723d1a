"""The stories260K greedy oracle for Python tests (stories260k_oracle.h's
sibling): read from ../shared/models/README.md, never pasted."""

import json
import re


def greedy64_oracle(readme_path):
    """(text, ids) from README.md's "64 tokens from llama.cpp" section.

    The section's first fenced block is the text as a JSON string, the one
    after "Generated token ids" the ids. Raises ValueError when the README
    no longer reads that way.
    """
    readme = readme_path.read_text(encoding="utf-8")
    section = re.search(r"^### 64 tokens from llama\.cpp.*?(?=^### |\Z)",
                        readme, re.M | re.S)
    if section is None:
        raise ValueError(f"{readme_path}: no '### 64 tokens from llama.cpp'")
    blocks = re.findall(r"^```\n(.*?)^```", section.group(0), re.M | re.S)
    if len(blocks) < 2:
        raise ValueError(f"{readme_path}: expected two fenced blocks, got "
                         f"{len(blocks)}")
    text = json.loads(blocks[0])
    ids = [int(t) for t in blocks[1].split()]
    if not isinstance(text, str) or len(ids) != 64:
        raise ValueError(f"{readme_path}: unexpected oracle: {text!r}, "
                         f"{len(ids)} ids")
    return text, ids
