#!/usr/bin/python3
"""tools/check_includes.py on small trees of its own: a rule broken, a
folder with no rule, the tests' freedom, and the real tree clean."""
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "check_includes.py"


def run(root):
    return subprocess.run([sys.executable, str(SCRIPT), str(root)],
                          capture_output=True, text=True, check=False)


def write(root, path, text):
    p = pathlib.Path(root) / path
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


class CheckIncludesTest(unittest.TestCase):

    def test_the_tree_follows_its_rules(self):
        r = run(ROOT)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_an_upward_include_is_named_with_its_line(self):
        with tempfile.TemporaryDirectory() as root:
            write(root, "scheduler/loop.h", "")
            write(root, "engine/sampling/chain.h",
                  '#include <vector>\n#include "scheduler/loop.h"\n')
            r = run(root)
            self.assertEqual(r.returncode, 1)
            self.assertIn("engine/sampling/chain.h:2: engine/sampling may "
                          "not include scheduler/loop.h", r.stderr)

    def test_a_folder_without_a_rule_fails(self):
        with tempfile.TemporaryDirectory() as root:
            write(root, "server/brand_new/thing.cc", "int x;\n")
            r = run(root)
            self.assertEqual(r.returncode, 1)
            self.assertIn("server/brand_new: no include rule", r.stderr)

    def test_tests_and_build_folders_are_free(self):
        with tempfile.TemporaryDirectory() as root:
            write(root, "server/daemon.h", "")
            write(root, "tests/engine/x_test.cc",
                  '#include "server/daemon.h"\n')
            write(root, "build-asan/gen/y.cc", '#include "server/daemon.h"\n')
            r = run(root)
            self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
