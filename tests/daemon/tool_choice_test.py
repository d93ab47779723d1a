#!/usr/bin/env python3
"""tool_choice enforced on the real pacelined (issue 35): with "required"
or a named function every answer is a tool call whose arguments are JSON
valid under the tool's parameters, checked from outside the daemon by
json.loads and python3-jsonschema. The model is stories260K sampling at
temperature 1 — a model that has never seen a tool call — so whatever it
writes is the grammar's doing.

Two call syntaxes, each behind a real chat template whose tools section
leaves room in stories260K's 512 positions: Mistral Nemo's
`[TOOL_CALLS][{...}]` and Qwen 3's Hermes `<tool_call>` blocks (Qwen 2.5's
tools section alone takes about 440 positions).

Strict tools under tool_choice "auto" are held lazily (free text until the
model opens a call); stories260K never opens one, so there the answers
must simply stay free text. Environment: as openai_http_test.py.
"""

import json
import pathlib
import re
import sys
import tempfile
import unittest

import jsonschema

from openai_http_test import DaemonTestCase, SHARED_DIR

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "testing"))
import gguf_context  # noqa: E402

TEMPLATES = SHARED_DIR / "chat_templates"

# Small, so that the tools section and a call fit the context.
WEATHER = {
    "type": "object",
    "properties": {
        "c": {"type": "string", "maxLength": 4},
        "u": {"enum": ["c", "f"]},
    },
    "required": ["c", "u"],
    "additionalProperties": False,
}
PICK = {
    "type": "object",
    "properties": {"x": {"enum": [1, 2]}},
    "required": ["x"],
    "additionalProperties": False,
}
NOTHING = {"type": "object", "additionalProperties": False}
SEEDS = range(1, 9)


def tools(schemas, strict=True, description=None):
    """`description` (some templates require one): each tool's."""
    out = [{"type": "function",
            "function": {"name": name, "strict": strict,
                         "parameters": schema}}
           for name, schema in schemas.items()]
    if description is not None:
        for tool in out:
            tool["function"]["description"] = description
    return out


class ToolChoiceCase(DaemonTestCase):
    """A daemon serving stories260K behind TEMPLATE."""

    TEMPLATE = None

    @classmethod
    def setUpClass(cls):
        if cls.TEMPLATE is None:
            raise unittest.SkipTest("the base class")
        if not (TEMPLATES / cls.TEMPLATE).is_file():
            raise unittest.SkipTest(f"no {cls.TEMPLATE}")
        cls.EXTRA_ARGS = ("--chat-template-file",
                          str(TEMPLATES / cls.TEMPLATE))
        super().setUpClass()

    DESCRIPTION = None  # each tool's description, where the template wants one

    def chat(self, schemas, extra, seed=1, max_tokens=100):
        body = {"messages": [{"role": "user", "content": "Hi"}],
                "max_tokens": max_tokens, "temperature": 1.0, "seed": seed,
                "tools": tools(schemas, description=self.DESCRIPTION)}
        body.update(extra)
        status, _, answer = self.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, answer)
        return answer["choices"][0]

    def assert_valid_calls(self, calls, schemas):
        """Every call names a tool and its arguments validate."""
        self.assertTrue(calls, "no tool call")
        for call in calls:
            self.assertEqual(call["type"], "function")
            self.assertTrue(call["id"])
            name = call["function"]["name"]
            self.assertIn(name, schemas)
            arguments = json.loads(call["function"]["arguments"])
            jsonschema.validate(arguments, schemas[name])

    def assert_one_call(self, choice, schemas):
        self.assertEqual(choice["finish_reason"], "tool_calls", choice)
        calls = choice["message"]["tool_calls"]
        self.assertEqual(len(calls), 1, calls)
        self.assert_valid_calls(calls, schemas)
        return calls[0]


class MistralToolChoiceTest(ToolChoiceCase):

    TEMPLATE = "mistralai-Mistral-Nemo-Instruct-2407.jinja"

    def test_required_always_calls_with_valid_arguments(self):
        schemas = {"get_weather": WEATHER}
        for seed in SEEDS:
            with self.subTest(seed=seed):
                self.assert_one_call(self.chat(
                    schemas, {"tool_choice": "required",
                              "parallel_tool_calls": False}, seed), schemas)

    def test_required_picks_among_the_tools(self):
        schemas = {"a": PICK, "b": NOTHING}
        names = set()
        for seed in SEEDS:
            with self.subTest(seed=seed):
                call = self.assert_one_call(self.chat(
                    schemas, {"tool_choice": "required",
                              "parallel_tool_calls": False}, seed,
                    max_tokens=80), schemas)
                names.add(call["function"]["name"])
        self.assertEqual(names, {"a", "b"})

    def test_parallel_calls_are_each_valid(self):
        # stories260K goes on calling until max_tokens cuts a call: the cut
        # one is left out, every complete one validates.
        schemas = {"a": PICK, "b": NOTHING}
        for seed in (1, 2, 3):
            with self.subTest(seed=seed):
                choice = self.chat(schemas, {"tool_choice": "required"}, seed,
                                   max_tokens=80)
                self.assertIn(choice["finish_reason"],
                              ("tool_calls", "length"), choice)
                self.assert_valid_calls(choice["message"]["tool_calls"],
                                        schemas)

    def test_named_function_is_the_one_called(self):
        schemas = {"a": PICK, "b": NOTHING}
        named = {"type": "function", "function": {"name": "a"}}
        for seed in SEEDS:
            with self.subTest(seed=seed):
                call = self.assert_one_call(self.chat(
                    schemas, {"tool_choice": named}, seed, max_tokens=60),
                    schemas)
                self.assertEqual(call["function"]["name"], "a")

    def test_streamed_call_assembles_to_valid_arguments(self):
        schemas = {"get_weather": WEATHER}
        status, _, events = self.stream("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": 100, "seed": 3, "stream": True,
            "tools": tools(schemas), "tool_choice": "required",
            "parallel_tool_calls": False})
        self.assertEqual(status, 200, events)
        calls = {}
        finish = None
        for event in events:
            if event == "[DONE]":
                continue
            choice = json.loads(event)["choices"][0]
            finish = choice.get("finish_reason") or finish
            for delta in choice["delta"].get("tool_calls") or []:
                call = calls.setdefault(delta["index"], {
                    "id": "", "type": "function",
                    "function": {"name": "", "arguments": ""}})
                call["id"] += delta.get("id") or ""
                function = delta.get("function") or {}
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += (
                    function.get("arguments") or "")
        self.assertEqual(finish, "tool_calls")
        self.assertEqual(len(calls), 1, calls)
        self.assert_valid_calls(list(calls.values()), schemas)

    def test_strict_tools_under_auto_leave_prose_free(self):
        schemas = {"get_weather": WEATHER}
        for seed in (1, 2, 3):
            with self.subTest(seed=seed):
                choice = self.chat(schemas, {}, seed)  # auto, strict
                calls = choice["message"].get("tool_calls")
                if calls:
                    self.assert_valid_calls(calls, schemas)
                else:
                    self.assertIn(choice["finish_reason"],
                                  ("stop", "length"), choice)
                    self.assertIsInstance(choice["message"]["content"], str)

    def test_non_strict_schema_not_enforced_takes_any_object(self):
        schema = {"type": "object",
                  "properties": {"x": {"type": "array",
                                       "contains": {"type": "string"}}}}
        body = {"messages": [{"role": "user", "content": "Hi"}],
                "max_tokens": 100, "seed": 1, "tool_choice": "required",
                "parallel_tool_calls": False,
                "tools": tools({"f": schema}, strict=False)}
        status, _, answer = self.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, answer)
        calls = answer["choices"][0]["message"].get("tool_calls") or []
        for call in calls:
            self.assertIsInstance(json.loads(call["function"]["arguments"]),
                                  dict)

    def test_refusals_are_400(self):
        schema = {"type": "object",
                  "properties": {"x": {"type": "array",
                                       "contains": {"type": "string"}}}}
        status, _, body = self.post("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": 4, "tool_choice": "required",
            "tools": tools({"f": schema})})
        self.assertEqual(status, 400, body)
        self.assertEqual(body["error"]["type"], "invalid_request_error")
        self.assertIn("'contains'", body["error"]["message"])
        self.assertIn("tool 'f'", body["error"]["message"])
        self.assert_error(
            self.post("/v1/chat/completions", {
                "messages": [{"role": "user", "content": "Hi"}],
                "max_tokens": 4, "tools": tools({"f": NOTHING}),
                "response_format": {"type": "json_object"}}),
            400, "invalid_request_error", param="response_format")


class HermesToolChoiceTest(ToolChoiceCase):
    """Qwen 3's `<tool_call>\\n{...}\\n</tool_call>`; one tool without
    arguments fits the context (its tools section takes about 410)."""

    TEMPLATE = "Qwen-Qwen3-0.6B.jinja"
    SCHEMAS = {"f": NOTHING}

    def test_required_and_named_are_one_valid_call(self):
        named = {"type": "function", "function": {"name": "f"}}
        for choice in ("required", named):
            for seed in SEEDS:
                with self.subTest(tool_choice=choice, seed=seed):
                    call = self.assert_one_call(self.chat(
                        self.SCHEMAS, {"tool_choice": choice,
                                       "parallel_tool_calls": False},
                        seed, max_tokens=60), self.SCHEMAS)
                    self.assertEqual(call["function"]["arguments"], "{}")
                    self.assertTrue(re.fullmatch(r"call_[A-Za-z0-9]{9}",
                                                 call["id"]), call)


class LongContextToolChoiceCase(ToolChoiceCase):
    """TEMPLATE's tools section passes 512 positions: stories260K with a
    CONTEXT-position context (tests/testing/gguf_context.py)."""

    CONTEXT = 2048

    @classmethod
    def setUpClass(cls):
        if cls.TEMPLATE is None:
            raise unittest.SkipTest("the base class")
        source = SHARED_DIR / "models" / "stories260K.gguf"
        if not source.is_file():
            raise unittest.SkipTest(f"no {source}")
        cls.model_dir = tempfile.TemporaryDirectory()
        cls.MODEL_ARG = gguf_context.with_context_length(
            source, pathlib.Path(cls.model_dir.name) / "stories260K.gguf",
            cls.CONTEXT)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.model_dir.cleanup()

    def test_required_and_named_are_one_valid_call(self):
        named = {"type": "function", "function": {"name": "weather"}}
        schemas = {"weather": WEATHER, "pick": PICK}
        for choice in ("required", named):
            for seed in SEEDS:
                with self.subTest(tool_choice=choice, seed=seed):
                    call = self.assert_one_call(self.chat(
                        schemas, {"tool_choice": choice,
                                  "parallel_tool_calls": False},
                        seed, max_tokens=120), schemas)
                    if choice is named:
                        self.assertEqual(call["function"]["name"], "weather")


class Qwen3CoderToolChoiceTest(LongContextToolChoiceCase):
    """Qwen3-Coder's (and Qwen3.5's) XML calls: `<tool_call>\n<function=N>
    \n<parameter=P>\nV\n</parameter>...`, string values raw."""

    TEMPLATE = "Qwen3-Coder.jinja"


class GlmToolChoiceTest(LongContextToolChoiceCase):
    """GLM 4.7's `<tool_call>N<arg_key>K</arg_key><arg_value>V</arg_value>`."""

    TEMPLATE = "GLM-4.7-Flash.jinja"


class GptOssToolChoiceTest(LongContextToolChoiceCase):
    """gpt-oss harmony: `to=functions.N ... <|message|>{...}<|call|>`."""

    TEMPLATE = "openai-gpt-oss-120b.jinja"
    DESCRIPTION = "A test tool."


class CommandR7bToolChoiceTest(LongContextToolChoiceCase):
    """Command R7B's JSON list: `<|START_ACTION|>[\n    {"tool_call_id":
    "0", "tool_name": N, "parameters": {...}}\n]<|END_ACTION|>`."""

    TEMPLATE = "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"
    CONTEXT = 8192  # its system prompt: ~4,100 of stories260K's tokens


class DeepSeekR1ToolChoiceTest(LongContextToolChoiceCase):
    """DeepSeek R1's fenced arguments; its prompt opens `<think>`, which
    the forced call closes first."""

    TEMPLATE = "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"


class FunctionaryV32ToolChoiceTest(LongContextToolChoiceCase):
    """Functionary v3.2's `>>>N\n{...}`; its prompt ends with the `>>>`."""

    TEMPLATE = "meetkai-functionary-medium-v3.2.jinja"


if __name__ == "__main__":
    unittest.main(verbosity=2)
