"""Unmodified `openai` and `anthropic` clients driving `gyre record` (tests/cli/record_proxy.rs).

usage: clients.py BASE_URL SCENARIO [STATE_FILE]

Each scenario is an agent loop as a harness writes it: it sends the conversation, runs the tool
calls it gets back and appends their results. Tool calls are re-serialised the way many harnesses
do (compact JSON, keys in another order) and thinking is dropped, so only payload restoration
keeps the policy's context exact. Failures raise (exit status 1).
"""

import json
import sys

import anthropic
import openai

SYSTEM = "You are a careful shell agent. Run one command per turn."
PARAMETERS = {
    "type": "object",
    "properties": {
        "command": {"type": "string"},
        "step": {"type": "integer"},
        "options": {"type": "object"},
    },
    "required": ["command"],
}
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command.",
            "parameters": PARAMETERS,
        },
    }
]
ANTHROPIC_TOOLS = [
    {"name": "bash", "description": "Run a shell command.", "input_schema": PARAMETERS}
]
RESPONSES_TOOLS = [
    {
        "type": "function",
        "name": "bash",
        "description": "Run a shell command.",
        "parameters": PARAMETERS,
        "strict": False,
    },
    {"type": "web_search"},
]
TASK_TOOL = {
    "name": "Task",
    "description": "Delegate work to a sub-agent.",
    "input_schema": {"type": "object", "properties": {"prompt": {"type": "string"}}},
}


def reorder(value):
    """Keys reversed at every level (another harness's key order)."""
    if isinstance(value, dict):
        return {k: reorder(v) for k, v in reversed(list(value.items()))}
    return value


def compact(arguments):
    return json.dumps(reorder(json.loads(arguments)), separators=(",", ":"))


def run_tool(name, arguments):
    return f"ran {name} with {json.dumps(arguments, sort_keys=True)}\nexit 0"


def openai_client(base, execution=None):
    headers = {"x-gyre-execution": execution} if execution else {}
    return openai.OpenAI(
        base_url=base + "/v1", api_key="unused", max_retries=0, default_headers=headers
    )


def anthropic_client(base, execution=None):
    headers = {"x-gyre-execution": execution} if execution else {}
    return anthropic.Anthropic(
        base_url=base, api_key="unused", max_retries=0, default_headers=headers
    )


def openai_turn(client, messages, stream):
    """One call; returns (content, calls, finish) with calls as [{id, name, arguments}]."""
    if not stream:
        r = client.chat.completions.create(
            model="policy", messages=messages, tools=OPENAI_TOOLS, temperature=1.0, logprobs=True
        )
        m = r.choices[0].message
        lps = r.choices[0].logprobs.content
        assert len(lps) == r.usage.completion_tokens and all(t.logprob < 0 for t in lps)
        calls = [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in m.tool_calls or []
        ]
        assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
        return m.content or "", calls, r.choices[0].finish_reason
    content, calls, finish, usage = "", {}, None, None
    for chunk in client.chat.completions.create(
        model="policy",
        messages=messages,
        tools=OPENAI_TOOLS,
        temperature=1.0,
        stream=True,
        stream_options={"include_usage": True},
    ):
        if chunk.usage is not None:
            usage = chunk.usage
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for c in delta.tool_calls or []:
            entry = calls.setdefault(c.index, {"id": None, "name": "", "arguments": ""})
            entry["id"] = c.id or entry["id"]
            entry["name"] += c.function.name or ""
            entry["arguments"] += c.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert usage is not None and usage.total_tokens > 0
    return content, [calls[i] for i in sorted(calls)], finish


def openai_loop(base, execution, stream, messages=None, rounds=20):
    client = openai_client(base, execution)
    messages = messages or [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Run the steps one by one. steps=3"},
    ]
    for _ in range(rounds):
        content, calls, finish = openai_turn(client, messages, stream)
        if not calls:
            assert finish == "stop", finish
            assert content.startswith("Finished after"), content
            return messages
        assert finish == "tool_calls", finish
        assert all(c["id"].startswith("call_") for c in calls)
        messages.append(
            {
                "role": "assistant",
                "content": content,
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": compact(c["arguments"])},
                    }
                    for c in calls
                ],
            }
        )
        for c in calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": c["id"],
                    "content": run_tool(c["name"], json.loads(c["arguments"])),
                }
            )
    return messages


def anthropic_turn(client, messages, stream, system=SYSTEM, tools=None):
    kwargs = dict(
        model="policy",
        max_tokens=1024,
        system=system,
        messages=messages,
        tools=tools if tools is not None else ANTHROPIC_TOOLS,
    )
    if stream:
        with client.messages.stream(**kwargs) as s:
            texts = "".join(s.text_stream)
            r = s.get_final_message()
        assert texts == "".join(b.text for b in r.content if b.type == "text")
    else:
        r = client.messages.create(**kwargs)
    assert r.usage.input_tokens > 0 and r.usage.output_tokens > 0
    return r


def resend(block):
    """The block as a harness sends it back: tool input keys reordered, thinking dropped."""
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": reorder(block.input)}
    if block.type == "text":
        return {"type": "text", "text": block.text}
    return None


def anthropic_loop(base, execution, stream, messages=None, rounds=20, system=SYSTEM, client=None):
    client = client or anthropic_client(base, execution)
    messages = messages or [{"role": "user", "content": "Run the steps one by one. steps=3"}]
    for _ in range(rounds):
        r = anthropic_turn(client, messages, stream, system)
        uses = [b for b in r.content if b.type == "tool_use"]
        if not uses:
            assert r.stop_reason == "end_turn", r.stop_reason
            return messages, r
        assert r.stop_reason == "tool_use", r.stop_reason
        assert all(b.id.startswith("toolu_") for b in uses)
        messages.append(
            {"role": "assistant", "content": [x for x in map(resend, r.content) if x]}
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": b.id, "content": run_tool(b.name, b.input)}
                    for b in uses
                ],
            }
        )
    return messages, r


def responses_turn(client, items, mode):
    """One Responses call: plain, as raw stream events, or through the SDK's stream helper."""
    kwargs = dict(
        model="policy",
        instructions=SYSTEM,
        input=items,
        tools=RESPONSES_TOOLS,
        temperature=1.0,
        store=False,
        include=["message.output_text.logprobs"],
    )
    if mode == "plain":
        r = client.responses.create(**kwargs)
    elif mode == "events":
        events = list(client.responses.create(stream=True, **kwargs))
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert events[0].type == "response.created", events[0].type
        assert events[-1].type == "response.completed", events[-1].type
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        r = events[-1].response
        assert text == r.output_text, (text, r.output_text)
        args = "".join(
            e.delta for e in events if e.type == "response.function_call_arguments.delta"
        )
        assert args == "".join(o.arguments for o in r.output if o.type == "function_call")
    else:
        with client.responses.stream(**kwargs) as s:
            text = "".join(e.delta for e in s if e.type == "response.output_text.delta")
            r = s.get_final_response()
        assert text == r.output_text, (text, r.output_text)
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.usage.input_tokens > 0 and r.usage.output_tokens > 0
    for o in r.output:
        if o.type == "message":
            assert all(t.logprob < 0 for t in o.content[0].logprobs) and o.content[0].logprobs
    return r


def responses_loop(base, execution, mode):
    """Codex CLI's loop: the whole input every time, output items sent back as they came
    (arguments re-serialised), a function_call_output per call."""
    client = openai_client(base, execution)
    items = [{"role": "user", "content": [{"type": "input_text", "text": "Run the steps one by one. steps=3"}]}]
    for _ in range(20):
        r = responses_turn(client, items, mode)
        calls = [o for o in r.output if o.type == "function_call"]
        if not calls:
            assert r.status == "completed", r.status
            assert r.output_text.startswith("Finished after"), r.output_text
            return
        assert all(c.call_id.startswith("call_") for c in calls)
        for o in r.output:
            if o.type == "reasoning":
                items.append(
                    {
                        "type": "reasoning",
                        "id": o.id,
                        "summary": [],
                        "content": [{"type": "reasoning_text", "text": c.text} for c in o.content],
                    }
                )
            elif o.type == "message":
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": o.content[0].text}],
                    }
                )
            else:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": o.call_id,
                        "name": o.name,
                        "arguments": compact(o.arguments),
                    }
                )
        for c in calls:
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": c.call_id,
                    "output": run_tool(c.name, json.loads(c.arguments)),
                }
            )
    raise AssertionError("no final answer")


def responses(base):
    """The Responses API three ways beside a Chat Completions reference; stored state refused."""
    openai_loop(base, "oa-plain", stream=False)
    responses_loop(base, "rs-plain", "plain")
    responses_loop(base, "rs-events", "events")
    responses_loop(base, "rs-stream", "helper")
    client = openai_client(base)
    try:
        client.responses.create(model="policy", input="hi", previous_response_id="resp_1")
    except openai.BadRequestError as e:
        assert e.body["param"] == "previous_response_id", e.body
        assert "whole conversation" in e.body["message"], e.body
    else:
        raise AssertionError("previous_response_id accepted")


def agents_sdk(base):
    """The OpenAI Agents SDK's default model (Responses) with a function tool, as its docs
    write an agent; the run ends with the model's final answer."""
    import asyncio

    import agents

    calls = []

    @agents.function_tool(strict_mode=False)
    def bash(command: str, step: int = 0, options: dict | None = None) -> str:
        """Run a shell command."""
        calls.append((command, step))
        return run_tool("bash", {"command": command, "step": step, "options": options})

    client = openai.AsyncOpenAI(
        base_url=base + "/v1",
        api_key="unused",
        max_retries=0,
        default_headers={"x-gyre-execution": "agents-sdk"},
    )
    model = agents.OpenAIResponsesModel(model="policy", openai_client=client)
    agent = agents.Agent(name="shell", instructions=SYSTEM, tools=[bash], model=model)
    agents.set_tracing_disabled(True)
    result = asyncio.run(agents.Runner.run(agent, "Run the steps one by one. steps=3"))
    assert result.final_output.startswith("Finished after 3 steps"), result.final_output
    assert calls == [("echo 0", 0), ("echo 1", 1), ("echo 2", 2)], calls


def loops(base):
    """The same task four ways: OpenAI and Anthropic, streaming and not."""
    openai_loop(base, "oa-plain", stream=False)
    openai_loop(base, "oa-stream", stream=True)
    anthropic_loop(base, "an-plain", stream=False)
    anthropic_loop(base, "an-stream", stream=True)


def expect_openai_error(client, content, status, kind, says=""):
    try:
        client.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": content}]
        )
    except openai.APIStatusError as e:
        assert e.status_code == status, (content, e.status_code, e.body)
        assert e.body["type"] == kind, (content, e.body)
        assert e.body["message"] and says in e.body["message"], (says, e.body)
        return
    raise AssertionError(f"no error for {content!r}")


def expect_anthropic_error(client, content, status, kind, stream=False, says=""):
    try:
        kwargs = dict(model="policy", max_tokens=64, messages=[{"role": "user", "content": content}])
        if stream:
            with client.messages.stream(**kwargs) as s:
                s.get_final_message()
        else:
            client.messages.create(**kwargs)
    except anthropic.APIStatusError as e:
        assert e.status_code == status, (content, e.status_code, e.body)
        assert e.body["type"] == "error", e.body
        assert e.body["error"]["type"] == kind, (content, e.body)
        assert says in e.body["error"]["message"], (says, e.body)
        return
    raise AssertionError(f"no error for {content!r}")


def errors(base):
    """Every bad upstream answer is a proper API error in both APIs."""
    oa, an = openai_client(base, "bad-openai"), anthropic_client(base, "bad-anthropic")
    for marker, status, oa_kind, an_kind, says in [
        ("FAIL-STATUS", 502, "upstream_error", "api_error", "HTTP 500"),
        ("FAIL-NOIDS", 502, "upstream_error", "api_error", "token_ids"),
        ("FAIL-LOGPROBS", 502, "upstream_error", "api_error", "1 log-prob for 2 sampled tokens"),
        ("FAIL-BADID", 502, "upstream_error", "api_error", "token id 999999999"),
        ("FAIL-SLOW", 504, "timeout_error", "timeout_error", ""),
    ]:
        expect_openai_error(oa, f"please {marker}", status, oa_kind, says)
        expect_anthropic_error(an, f"please {marker}", status, an_kind, says=says)
        expect_anthropic_error(an, f"stream {marker}", status, an_kind, stream=True, says=says)
    try:
        oa.chat.completions.create(
            model="policy",
            messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
        )
        raise AssertionError("an image was accepted")
    except openai.BadRequestError as e:
        assert e.body["param"] == "messages[0].content[0].type", e.body
    # A good call after the failures still works (and is the only one recorded).
    content, calls, _ = openai_turn(openai_client(base, "good"), [
        {"role": "user", "content": "steps=1"}], stream=False)
    assert calls and content == "Running step 0.", content


def resume_a(base, state):
    """Two rounds, then the conversation is saved (the proxy is restarted after this)."""
    messages = openai_loop(base, "resume", stream=False, rounds=2)
    with open(state, "w") as f:
        json.dump(messages, f)


def resume_b(base, state):
    with open(state) as f:
        messages = json.load(f)
    openai_loop(base, "resume", stream=True, messages=messages)


def claude_code_like(base):
    """No attribution headers: a main agent delegates to a sub-agent (Task), then compacts
    and goes on from the summary, as Claude Code does."""
    client = anthropic_client(base)
    tools = ANTHROPIC_TOOLS + [TASK_TOOL]
    main = [{"role": "user", "content": "Please delegate the investigation. steps=1"}]
    r = anthropic_turn(client, main, stream=True, tools=tools)
    task = next(b for b in r.content if b.type == "tool_use")
    assert task.name == "Task", r.content
    # The sub-agent: its own system prompt, the Task prompt as its first message.
    sub_messages, sub_final = anthropic_loop(
        base, None, stream=False, system="You are a sub-agent.",
        messages=[{"role": "user", "content": task.input["prompt"]}], client=client,
    )
    report = "".join(b.text for b in sub_final.content if b.type == "text")
    main.append({"role": "assistant", "content": [x for x in map(resend, r.content) if x]})
    main.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": task.id, "content": report}]})
    r = anthropic_turn(client, main, stream=False, tools=tools)
    assert r.stop_reason == "end_turn", r.content
    main.append({"role": "assistant", "content": [x for x in map(resend, r.content) if x]})
    # Compaction.
    main.append({"role": "user", "content": "Your task is to create a detailed summary of "
                 "the conversation so far, paying close attention to the user's requests."})
    r = anthropic_turn(client, main, stream=False, tools=[])
    text = "".join(b.text for b in r.content if b.type == "text")
    summary = text.split("<summary>")[1].split("</summary>")[0].strip()
    # The conversation after compaction starts from the summary, reworded around it.
    after = [{"role": "user", "content": "This session is being continued from a previous "
              "conversation that ran out of context. Summary:\n" + summary + "\n\nsteps=1"}]
    anthropic_loop(base, None, stream=True, messages=after, client=client)


def edited(base):
    """A harness that changes a tool call's arguments before sending it back."""
    client = openai_client(base, "edited")
    messages = [{"role": "user", "content": "steps=2"}]
    content, calls, _ = openai_turn(client, messages, stream=False)
    args = json.loads(calls[0]["arguments"])
    args["command"] = "echo edited"
    messages.append({"role": "assistant", "content": content, "tool_calls": [
        {"id": calls[0]["id"], "type": "function",
         "function": {"name": "bash", "arguments": json.dumps(args)}}]})
    messages.append({"role": "tool", "tool_call_id": calls[0]["id"], "content": "edited"})
    openai_turn(client, messages, stream=False)


def control(path, body, status, token=None):
    """POSTs to the control listener ($GYRE_CONTROL_URL) with the control token; checks the
    status and returns the answer's JSON."""
    import os

    token = os.environ["GYRE_CONTROL_TOKEN"] if token is None else token
    return post(os.environ["GYRE_CONTROL_URL"] + path, body, status,
                {"authorization": f"Bearer {token}"} if token else {})


def post(url, body, status, headers=None):
    """POSTs JSON to `url`; the answer must have `status`; returns its JSON."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST",
        headers={"content-type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            got, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        got, text = e.code, e.read().decode()
    assert got == status, (url, body, got, text)
    answer = json.loads(text)
    if status != 200:
        assert answer["error"]["message"], text
    return answer


def close(base, *executions):
    """Closes and scores executions on the control listener; bad bodies are refused."""
    for e in executions:
        control("/gyre/closure", {"execution": e, "status": "completed", "artifact": "patch",
                                  "version": 1}, 200)
        control("/gyre/assessment", {"execution": e, "artifact": "patch", "version": 1,
                                     "status": "valid", "score": 1.0, "evaluator": "tests"}, 200)
    e = executions[0]
    control("/gyre/closure", {"execution": e, "status": "completed"}, 409)
    control("/gyre/closure", {"execution": "x", "status": "finished"}, 400)
    control("/gyre/assessment", {"execution": e, "artifact": "patch", "version": 1,
                                 "status": "valid"}, 400)
    control("/gyre/assessment", {"kind": "closure", "execution": e}, 400)
    control("/gyre/closure", [1, 2], 400)


def issue(base, state, *executions):
    """The evaluator issues executions on the control listener and saves their answers
    (`{"execution", "base_url", "openai_base_url"}`) in STATE; `-` asks for a random id."""
    issued = {}
    for e in executions:
        body = {} if e == "-" else {"execution": e, "group": "g1"}
        answer = control("/gyre/executions", body, 200)
        assert answer["openai_base_url"] == answer["base_url"] + "/v1", answer
        if e != "-":
            assert answer["execution"] == e, answer
            # Issuing an open issued execution again gives the same URL.
            assert control("/gyre/executions", body, 200) == answer
        issued[answer["execution"] if e == "-" else e] = answer
    with open(state, "w") as f:
        json.dump(issued, f)


def capability_loops(base, oa_base, an_base):
    """Unmodified clients pointed at capability URLs (no attribution header): Chat
    Completions, Messages and Responses."""
    openai_loop(oa_base, None, stream=False)
    anthropic_loop(an_base, None, stream=True)
    responses_loop(oa_base, None, "events")


def score(base, execution, value):
    """The evaluator closes EXECUTION and scores it VALUE."""
    control("/gyre/closure", {"execution": execution, "status": "completed",
                              "artifact": "patch", "version": 1}, 200)
    control("/gyre/assessment", {"execution": execution, "artifact": "patch", "version": 1,
                                 "status": "valid", "score": float(value),
                                 "evaluator": "tests"}, 200)


def expect_status(call, status, kind):
    try:
        call()
    except (openai.APIStatusError, anthropic.APIStatusError) as e:
        body = e.body if isinstance(e, openai.APIStatusError) and "type" in (e.body or {}) \
            else (e.body or {}).get("error", e.body)
        assert e.status_code == status, (e.status_code, e.body)
        assert body["type"] == kind, e.body
        return
    raise AssertionError(f"no {status} error")


def agent(base, own, victim, control_url):
    """The agent under training, with only the model URL (the plain one and its execution's
    capability URL) and the control listener's address (found by scanning loopback ports),
    tries to write its own reward and to reach another execution. Nothing may work."""
    reward = {"execution": victim, "status": "completed", "artifact": "patch", "version": 1}
    score_body = {"execution": victim, "artifact": "patch", "version": 1, "status": "valid",
                  "score": 1.0}
    own_exec, own_cap = own.rsplit("/", 2)[1:]
    # 1. No control route on the model listener, plain or under a capability URL.
    for root in (base, own, own + "/v1"):
        for path, body in (("/gyre/closure", reward), ("/gyre/assessment", score_body),
                           ("/gyre/executions", {}), ("/gyre/closure", dict(reward, execution=own_exec))):
            post(root + path, body, 404)
    # 2. The control listener wants the token: none, a guessed one, the capability, a token
    #    passed as a query string or a cookie.
    for headers in ({}, {"authorization": "Bearer " + "0" * 64},
                    {"authorization": "Bearer " + own_cap}, {"authorization": own_cap},
                    {"cookie": "token=" + own_cap}):
        for path, body in (("/gyre/closure", reward), ("/gyre/assessment", score_body),
                           ("/gyre/closure", dict(reward, execution=own_exec)),
                           ("/gyre/executions", {"execution": "mine"})):
            post(control_url + path, body, 401, headers)
    post(control_url + "/gyre/closure?token=" + own_cap, reward, 401)
    # 3. Its own calls cannot be moved into the victim's execution.
    messages = [{"role": "user", "content": "steps=1"}]
    moved = openai.OpenAI(base_url=own + "/v1", api_key="x", max_retries=0,
                          default_headers={"x-gyre-execution": victim})
    expect_status(lambda: moved.chat.completions.create(model="p", messages=messages),
                  403, "permission_error")
    for headers in ({"x-gyre-execution": victim}, {"x-claude-code-session-id": victim}):
        plain = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0,
                              default_headers=headers)
        expect_status(lambda: plain.chat.completions.create(model="p", messages=messages),
                      403, "permission_error")
    an = anthropic.Anthropic(base_url=base, api_key="x", max_retries=0)
    for user_id in (f"user_a_account_b_session_{victim}",
                    json.dumps({"device_id": "d", "account_uuid": "", "session_id": victim})):
        expect_status(lambda: an.messages.create(
            model="p", max_tokens=64, messages=messages, metadata={"user_id": user_id}),
            403, "permission_error")
    # 4. Forged capability URLs: the victim's id with its own capability, or a guessed one.
    flipped = own_cap[:-1] + ("1" if own_cap[-1] == "0" else "0")
    for forged in (f"{base}/x/{victim}/{own_cap}", f"{base}/x/{victim}/{'0' * 32}",
                   f"{base}/x/{own_exec}/{flipped}", f"{base}/x/{own_exec}/{own_cap.upper()}"):
        c = openai.OpenAI(base_url=forged + "/v1", api_key="x", max_retries=0)
        expect_status(lambda: c.chat.completions.create(model="p", messages=messages),
                      404, "not_found_error")
    # What it may do: call the model in its own execution, and start a fresh one on the plain
    # routes (recorded under a random id nobody scores).
    openai_turn(openai.OpenAI(base_url=own + "/v1", api_key="x", max_retries=0), messages, False)
    openai_turn(openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0), messages, False)


def claude_code_today(base):
    """Claude Code 2.1.205-shaped requests: a billing-header `system[0]` whose `cch` hash changes
    every request, `metadata.user_id` as a JSON string, and a screenshot in a tool result."""
    import random

    client = anthropic.Anthropic(base_url=base, api_key="x", max_retries=0)
    user_id = json.dumps({"device_id": "5ab1", "account_uuid": "", "session_id": "cc-today"})

    def system():
        cch = "%05x" % random.randrange(16 ** 5)
        return [{"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1.205.a1; "
                 f"cc_entrypoint=cli; cch={cch};"}, {"type": "text", "text": SYSTEM}]

    def call():
        # Streaming, as Claude Code does (the SDK refuses max_tokens 32000 without it).
        with client.messages.stream(model="p", max_tokens=32000, system=system(),
                                    messages=messages, tools=ANTHROPIC_TOOLS,
                                    metadata={"user_id": user_id}) as s:
            return s.get_final_message()

    messages = [{"role": "user", "content": "Take a screenshot. steps=1"}]
    r = call()
    use = next(b for b in r.content if b.type == "tool_use")
    messages.append({"role": "assistant", "content": [x for x in map(resend, r.content) if x]})
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
        "content": [{"type": "text", "text": "saved"}, {"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}]})
    r = call()
    assert r.stop_reason == "end_turn", r.content


def prefill(base):
    """Claude Code's title call: the last message is an assistant prefill `{`. The model continues
    that turn, and the client gets the continuation only (as from Anthropic's API), so `{` plus
    the text is the JSON. Streamed and not; vLLM's continue_final_message over the Chat API."""
    client = anthropic_client(base, "title")
    messages = [
        {"role": "user", "content": "Write a 3-word title for this session: run shell steps."},
        {"role": "assistant", "content": "{"},
    ]
    r = client.messages.create(model="p", max_tokens=512, messages=messages)
    assert r.stop_reason == "end_turn", r
    text = "".join(b.text for b in r.content if b.type == "text")
    assert text == '"title": "Shell steps"}', text
    assert json.loads("{" + text) == {"title": "Shell steps"}
    with client.messages.stream(model="p", max_tokens=32000, messages=messages) as s:
        streamed = s.get_final_message()
    assert "".join(b.text for b in streamed.content if b.type == "text") == text
    # Prefill given as a text block; trailing whitespace is refused, as Anthropic's API does.
    blocks = [messages[0], {"role": "assistant", "content": [{"type": "text", "text": "Well"}]}]
    r = client.messages.create(model="p", max_tokens=100, messages=blocks)
    assert r.content[0].text == " and so on.", r.content
    bad = [messages[0], {"role": "assistant", "content": "Well "}]
    try:
        client.messages.create(model="p", max_tokens=100, messages=bad)
        raise AssertionError("a prefill ending in whitespace was accepted")
    except anthropic.BadRequestError as e:
        assert "trailing whitespace" in str(e), e
    chat = openai_client(base, "title-chat").chat.completions.create(
        model="p", messages=[{"role": "user", "content": "Name it."},
                             {"role": "assistant", "content": "{"}],
        extra_body={"continue_final_message": True, "add_generation_prompt": False})
    assert chat.choices[0].message.content == '"title": "Shell steps"}', chat


def context(base):
    """Claude Code's max_tokens 32000 on a small context, and a client that sends none."""
    an = anthropic_client(base, "ctx-claude")
    with an.messages.stream(model="p", max_tokens=32000, tools=ANTHROPIC_TOOLS,
                            messages=[{"role": "user", "content": "steps=1"}]) as s:
        r = s.get_final_message()
    assert r.stop_reason == "tool_use", r.content
    content, calls, finish = openai_turn(openai_client(base, "ctx-none"),
                                         [{"role": "user", "content": "steps=1"}], False)
    assert finish == "tool_calls" and calls, (content, finish)
    # A prompt past the context is refused before sampling.
    expect_openai_error(openai_client(base, "ctx-long"), "word " * 3000, 400,
                        "invalid_request_error", "max_model_len")


def sampling(base):
    """Every sampling setting the Chat API has (vLLM's extensions through extra_body)."""
    r = openai_client(base, "samp-chat").chat.completions.create(
        model="p", messages=[{"role": "user", "content": "steps=0"}], temperature=0.7,
        top_p=0.9, seed=7, presence_penalty=0.5, frequency_penalty=0.25,
        extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1})
    assert r.choices[0].finish_reason == "stop", r


def stops(base):
    """A stop string ends the text before it (vLLM's answer: finish stop, the text cut); the
    client sends the cut text back and the next call continues the sample."""
    oa = openai_client(base, "stop-chat")
    messages = [{"role": "user", "content": "steps=0"}]
    r = oa.chat.completions.create(model="p", messages=messages, stop=["after"], logprobs=True)
    c = r.choices[0]
    assert (c.message.content, c.finish_reason) == ("Finished ", "stop"), c
    assert len(c.logprobs.content) == r.usage.completion_tokens
    assert "after" in "".join(t.token for t in c.logprobs.content), c.logprobs
    streamed = ""
    for chunk in oa.chat.completions.create(model="p", messages=messages, stop="after",
                                            stream=True):
        if chunk.choices:
            streamed += chunk.choices[0].delta.content or ""
    assert streamed == "Finished ", streamed
    messages += [{"role": "assistant", "content": c.message.content},
                 {"role": "user", "content": "again"}]
    r = oa.chat.completions.create(model="p", messages=messages, stop=["after"])
    assert r.choices[0].message.content == "Finished ", r
    an = anthropic_client(base, "stop-messages")
    for stream in (False, True):
        args = dict(model="p", max_tokens=100, stop_sequences=["after"],
                    messages=[{"role": "user", "content": "steps=0"}])
        if stream:
            with an.messages.stream(**args) as s:
                m = s.get_final_message()
        else:
            m = an.messages.create(**args)
        assert (m.stop_reason, m.stop_sequence) == ("stop_sequence", "after"), m
        assert [b.text for b in m.content if b.type == "text"] == ["Finished "], m.content


def expect_upstream_error(base, says):
    """Every chat call answers 502 saying `says`."""
    upstream_auth(base, says)


def upstream_auth(base, says):
    """The upstream refuses the proxy's credentials: a 502 that says what to do."""
    client = openai_client(base, "auth")
    try:
        client.chat.completions.create(model="p", messages=[{"role": "user", "content": "hi"}])
    except openai.APIStatusError as e:
        assert e.status_code == 502, (e.status_code, e.body)
        assert says in e.body["message"], e.body
        return
    raise AssertionError("no error")


SCENARIOS = {
    "loops": loops,
    "responses": responses,
    "agents-sdk": agents_sdk,
    "errors": errors,
    "claude-code-like": claude_code_like,
    "edited": edited,
    "claude-code-today": claude_code_today,
    "context": context,
    "prefill": prefill,
    "sampling": sampling,
    "stops": stops,
}

if __name__ == "__main__":
    base, scenario = sys.argv[1], sys.argv[2]
    if scenario == "resume-a":
        resume_a(base, sys.argv[3])
    elif scenario == "resume-b":
        resume_b(base, sys.argv[3])
    elif scenario == "close":
        close(base, *sys.argv[3:])
    elif scenario in ("issue", "capability-loops", "score", "agent", "upstream-auth",
                      "expect-upstream-error"):
        globals()[scenario.replace("-", "_")](base, *sys.argv[3:])
    else:
        SCENARIOS[scenario](base)
    print(f"{scenario}: ok")
