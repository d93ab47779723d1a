#!/usr/bin/env bash
# The README's curl examples against the real pacelined. Each example is a
# fenced block of tests/daemon/openai_curl_examples.md after a comment
# `<!-- curl-test: NAME -->`; it runs as written, with URL and KEY set to
# the daemon's HTTP address and its tenant's key, and Python (json, no
# third-party module) checks what curl printed against the stories260K
# oracle (../shared/models/README.md) and OpenAI's (and Anthropic's)
# response shapes.
# Exits 77 (skipped) without curl, the model or the chat template.
# usage: openai_curl_test.sh PACELINED SHARED_DIR EXAMPLES_MD [PYTHON3]
set -euo pipefail
daemon="$1"
shared="$2"
examples="$3"
py="${4:-/usr/bin/python3}"
model="$shared/models/stories260K.gguf"
readme="$shared/models/README.md"
template="$shared/chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja"

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v curl >/dev/null || skip "curl not found"
for f in "$model" "$readme" "$template"; do
  [[ -f "$f" ]] || skip "no $f"
done
[[ -x "$daemon" ]] || fail "$daemon is not an executable"
[[ -f "$examples" ]] || fail "no $examples"

tmp="$(mktemp -d)"
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"
    wait "$pid" || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

KEY="curl-test-key"
# Browser pages from one origin may call it (the CORS example).
echo 'http { cors_origins: "http://localhost:3000" }' >"$tmp/config.textproto"
"$daemon" --model "$model" --chat-template-file "$template" \
  --config "$tmp/config.textproto" \
  --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --kv-memory 16MiB \
  --tenant "alice:$KEY" --allow-root 2>"$tmp/stderr" &
pid=$!
for ((i = 0; i < 600; i++)); do  # 60 s
  grep -q '^pacelined: ready$' "$tmp/stderr" && break
  kill -0 "$pid" 2>/dev/null || fail "pacelined exited: $(cat "$tmp/stderr")"
  sleep 0.1
done
grep -q '^pacelined: ready$' "$tmp/stderr" ||
  fail "pacelined not ready: $(cat "$tmp/stderr")"
port="$(sed -n 's/^pacelined: http on .*:\([0-9]*\)$/\1/p' "$tmp/stderr")"
[[ -n "$port" ]] || fail "no 'http on' line: $(cat "$tmp/stderr")"
export URL="http://127.0.0.1:$port" KEY

# The block after `<!-- curl-test: NAME -->` in the examples file.
example() {
  awk -v marker="<!-- curl-test: $1 -->" '
    $0 == marker { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' "$examples"
}

# Checks example NAME's output file; the oracle is README.md's 64 tokens.
# shellcheck disable=SC2016  # Python source: nothing in it is for the shell
check='
import json, re, sys
mode, path, readme = sys.argv[1:4]
out = open(path, encoding="utf-8").read()

def oracle():
    text = open(readme, encoding="utf-8").read()
    section = re.search(r"^### 64 tokens from llama\.cpp.*?(?=^### |\Z)",
                        text, re.M | re.S).group(0)
    return json.loads(re.findall(r"^```\n(.*?)^```", section,
                                 re.M | re.S)[0])

def events():
    lines = [l for l in out.split("\n") if l.strip()]
    assert lines and all(l.startswith("data: ") for l in lines), out
    data = [l[len("data: "):] for l in lines]
    assert data[-1] == "[DONE]" and data.count("[DONE]") == 1, out
    chunks = [json.loads(d) for d in data[:-1]]
    assert len({c["id"] for c in chunks}) == 1, out
    assert all(type(c["created"]) is int for c in chunks), out
    return chunks

if mode == "models":
    j = json.loads(out)
    assert j["object"] == "list", j
    assert [m["id"] for m in j["data"]] == ["stories260K"], j
elif mode == "completion":
    j = json.loads(out)
    assert j["object"] == "text_completion", j
    assert j["choices"][0]["text"] == oracle(), j
    assert j["choices"][0]["finish_reason"] == "length", j
    assert j["usage"]["completion_tokens"] == 64, j
elif mode == "completion-stream":
    chunks = events()
    assert all(c["object"] == "text_completion" for c in chunks), out
    text = "".join(c["choices"][0]["text"] for c in chunks)
    assert text == oracle(), text
    assert chunks[-1]["choices"][0]["finish_reason"] == "length", out
elif mode == "chat":
    j = json.loads(out)
    assert j["object"] == "chat.completion", j
    message = j["choices"][0]["message"]
    assert message["role"] == "assistant", j
    assert isinstance(message["content"], str) and message["content"], j
    u = j["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
elif mode == "chat-stream":
    chunks = events()
    assert all(c["object"] == "chat.completion.chunk" for c in chunks), out
    usage, chunks = chunks[-1], chunks[:-1]
    assert usage["choices"] == [], usage
    u = usage["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant", out
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    text = "".join(c["choices"][0]["delta"].get("content") or ""
                   for c in chunks)
    assert text, out
elif mode == "json-schema":
    j = json.loads(out)
    assert j["choices"][0]["finish_reason"] == "stop", j
    pet = json.loads(j["choices"][0]["text"])
    assert set(pet) == {"name", "kind", "age"}, pet
    assert isinstance(pet["name"], str) and len(pet["name"]) <= 10, pet
    assert pet["kind"] in ("cat", "dog", "bird"), pet
    assert type(pet["age"]) is int and 0 <= pet["age"] <= 30, pet
elif mode == "wrong-key":
    body, status = out.rstrip("\n").rsplit("\n", 1)
    assert status == "401", out
    assert json.loads(body)["error"]["type"] == "authentication_error", out
elif mode == "messages":
    j = json.loads(out)
    assert j["type"] == "message" and j["role"] == "assistant", j
    assert j["id"].startswith("msg_"), j
    assert j["content"][0]["type"] == "text" and j["content"][0]["text"], j
    assert j["stop_reason"] in ("end_turn", "max_tokens"), j
    assert 1 <= j["usage"]["output_tokens"] <= 32, j
elif mode == "messages-stream":
    blocks = [b for b in out.split("\n\n") if b.strip()]
    names, text = [], ""
    for b in blocks:
        event, data = b.split("\n")
        assert event.startswith("event: ") and data.startswith("data: "), b
        names.append(event[len("event: "):])
        d = json.loads(data[len("data: "):])
        assert d["type"] == names[-1], b
        if d["type"] == "content_block_delta":
            text += d["delta"].get("text", "")
    assert names[0] == "message_start" and names[-1] == "message_stop", names
    assert names[-2] == "message_delta", names
    assert text, out
elif mode == "count-tokens":
    j = json.loads(out)
    assert list(j) == ["input_tokens"] and j["input_tokens"] > 5, j
elif mode == "messages-error":
    body, status = out.rstrip("\n").rsplit("\n", 1)
    assert status == "400", out
    j = json.loads(body)
    assert j["type"] == "error", j
    assert j["error"]["type"] == "invalid_request_error", j
    assert "max_tokens" in j["error"]["message"], j
elif mode == "responses":
    j = json.loads(out)
    assert j["object"] == "response" and j["id"].startswith("resp_"), j
    assert j["status"] in ("completed", "incomplete"), j
    msg = j["output"][-1]
    assert msg["type"] == "message" and msg["id"].startswith("msg_"), j
    assert msg["content"][0]["type"] == "output_text", j
    assert msg["content"][0]["text"], j
    u = j["usage"]
    assert 1 <= u["output_tokens"] <= 32, j
    assert u["total_tokens"] == u["input_tokens"] + u["output_tokens"], j
    assert "cached_tokens" in u["input_tokens_details"], j
elif mode == "responses-stream":
    blocks = [b for b in out.split("\n\n") if b.strip()]
    names, text, seq = [], "", []
    for b in blocks:
        event, data = b.split("\n")
        assert event.startswith("event: ") and data.startswith("data: "), b
        names.append(event[len("event: "):])
        d = json.loads(data[len("data: "):])
        assert d["type"] == names[-1], b
        seq.append(d["sequence_number"])
        if d["type"] == "response.output_text.delta":
            text += d["delta"]
    assert names[:2] == ["response.created", "response.in_progress"], names
    assert names[-1] in ("response.completed", "response.incomplete"), names
    assert seq == list(range(len(seq))), seq
    final = json.loads(blocks[-1].split("\n")[1][len("data: "):])
    assert final["response"]["output"][-1]["content"][0]["text"] == text, out
    assert text, out
elif mode == "cors-preflight":
    head = out.replace("\r\n", "\n").split("\n\n")[0].split("\n")
    assert head[0].split()[1] == "204", out
    h = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip()
         for l in head[1:] if ":" in l}
    assert h["access-control-allow-origin"] == "http://localhost:3000", h
    assert "POST" in h["access-control-allow-methods"], h
    assert h["access-control-allow-headers"] == "authorization, content-type", h
elif mode == "embeddings-generation-model":
    body, status = out.rsplit("\n", 2)[0], out.split()[-1]
    assert status == "400", out
    e = json.loads(body)["error"]
    assert e["type"] == "invalid_request_error", e
    assert "no pooling type" in e["message"], e
else:
    raise SystemExit("unknown example " + mode)
'

for name in models completion completion-stream chat chat-stream json-schema \
    wrong-key messages messages-stream count-tokens messages-error \
    responses responses-stream cors-preflight embeddings-generation-model; do
  code="$(example "$name")"
  [[ -n "$code" ]] || fail "no example '$name' in $examples"
  echo "--- $name"
  echo "$code"
  bash -c "$code" >"$tmp/$name.out" || fail "$name: exit $?"
  head -c 2000 "$tmp/$name.out"
  echo
  "$py" -c "$check" "$name" "$tmp/$name.out" "$readme" ||
    fail "$name: unexpected output"
done

kill -TERM "$pid"
code=0
wait "$pid" || code=$?
pid=""
[[ "$code" -eq 0 ]] || fail "pacelined exited $code: $(cat "$tmp/stderr")"
echo "PASS: every example"
