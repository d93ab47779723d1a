#!/usr/bin/python3
"""jinja2's rendering of chat templates: the oracle of the chat-template tests.

Renders the way model publishers' tooling renders `tokenizer.chat_template`:
an immutable sandboxed environment with trim_blocks and lstrip_blocks, the
loop controls (break, continue), a `{% generation %}` block that renders its
body, and the globals and filters templates call: raise_exception,
strftime_now (a fixed clock, 2026-01-15 12:00, so outputs repeat; the
renderer under test gets the same time) and tojson keeping non-ASCII text.

Reads one JSON request per line on stdin,
  {"template": "...", "context": {...variables}},
and writes one JSON answer per line on stdout, in order:
  {"ok": true, "text": "..."} or {"ok": false, "error": "..."}: the
  error "raise_exception: <message>" when the template raised, else
  "<jinja2's exception type>: <message>".
Needs Debian's python3-jinja2 (run with /usr/bin/python3).
"""
import datetime
import json
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox

CLOCK = datetime.datetime(2026, 1, 15, 12, 0, 0)


class Raised(Exception):
    """What a template's raise_exception(message) raises."""


def _raise(message):
    raise Raised(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None,
            sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


class Generation(jinja2.ext.Extension):
    """{% generation %}body{% endgeneration %}: renders body in a scope."""
    tags = {"generation"}

    def parse(self, parser):
        line = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"],
                                       drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=line)


def environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[jinja2.ext.loopcontrols, Generation])
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=_raise,
                       strftime_now=lambda fmt: CLOCK.strftime(fmt))
    return env


FAILURES = (jinja2.TemplateError, TypeError, ValueError, KeyError,
            AttributeError, IndexError)


def answer(env, request):
    try:
        template = env.from_string(request["template"])
        return {"ok": True, "text": template.render(**request.get("context", {}))}
    except Raised as e:
        return {"ok": False, "error": "raise_exception: %s" % e}
    except FAILURES as e:
        return {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}


def main():
    env = environment()
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(env, json.loads(line))
        sys.stdout.write(json.dumps(reply, ensure_ascii=False) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
