"""Drives a spyglass runtime with the real CodeSpar Python SDK (codespar==0.14.0).

Run by tests/sdk_compat.rs with CODESPAR_BASE_URL and CODESPAR_API_KEY set, against a
runtime in test mode whose policy denies */refund_* (rule "no_refunds") and holds
*/create_payment with input.value > 1000 for approval (rule "payments_require_approval").
Exits non-zero, naming the check, on the first mismatch.
"""

import asyncio
import json
import os
import sys

import httpx

import codespar
from codespar import (
    ApiError,
    AsyncCodeSpar,
    ChargeArgs,
    ChargeBuyer,
    ChargeResult,
    ShipArgs,
    is_approval_required,
    is_mocks_exhausted,
    is_policy_denied,
    is_tool_not_mocked,
)

BASE = os.environ["CODESPAR_BASE_URL"]
KEY = os.environ["CODESPAR_API_KEY"]
CHECKS = 0


def check(condition, what, detail=None):
    global CHECKS
    CHECKS += 1
    if not condition:
        print(f"MISMATCH: {what}" + (f": {detail!r}" if detail is not None else ""))
        sys.exit(1)


SCRIPT = {
    "sequence": [
        {
            "tool_calls": [
                {"name": "asaas/create_payment", "arguments": {"value": 5}},
                {"name": "asaas/create_payment", "arguments": {"value": 5000}},
                {"name": "asaas/refund_payment", "arguments": {"id": "pay_test_42"}},
                {"name": "asaas/create_paymet", "arguments": {}},
            ]
        },
        {"text": "Charged pay_test_42"},
    ]
}

MOCKS = {
    "asaas/create_payment": {"id": "pay_test_42", "status": "PENDING"},
    "nuvem-fiscal/create_nfe": [
        {"id": "nfe_1", "status": "AUTHORIZED"},
        {"id": "nfe_2", "status": "AUTHORIZED"},
    ],
    "asaas/refund_payment": {"id": "ref_1"},
}


async def new_session(cs, script=SCRIPT):
    return await cs.create(
        "user_test",
        servers=["asaas", "nuvem-fiscal"],
        metadata={"model_script": json.dumps(script), "suite": "compat"},
        mocks=MOCKS,
    )


async def execute_paths(cs):
    session = await new_session(cs)
    check(session.id.startswith("ses_"), "session id", session.id)
    check(session.info.status == "active", "session status", session.info.status)
    check(session.user_id == "user_test", "user_id", session.user_id)
    check(session.servers == ["asaas", "nuvem-fiscal"], "servers", session.servers)

    # Static: the same fixture on every call.
    for _ in range(2):
        r = await session.execute("asaas/create_payment", {"value": 100})
        check(r.success is True, "static execute succeeds", r)
        check(r.data == MOCKS["asaas/create_payment"], "static data", r.data)
        check(r.server == "asaas", "server", r.server)
        check(r.tool == "asaas/create_payment", "tool", r.tool)
        check((r.tool_call_id or "").startswith("call_"), "tool_call_id", r.tool_call_id)
        check(bool(r.called_at), "called_at", r.called_at)
        check(isinstance(r.duration, int), "duration", r.duration)

    # Stateful: entry N on call N, then mocks_exhausted (422).
    for want in ("nfe_1", "nfe_2"):
        r = await session.execute("nuvem-fiscal/create_nfe", {})
        check(r.success and r.data["id"] == want, f"stateful entry {want}", r)
    r = await session.execute("nuvem-fiscal/create_nfe", {})
    check(r.success is False and r.data is None, "exhausted is a failure", r)
    check(r.error.startswith("422:") and "mocks_exhausted" in r.error, "exhausted error", r.error)

    r = await session.execute("asaas/create_paymet", {})
    check(r.success is False, "not mocked fails", r)
    check(r.error.startswith("422:") and "tool_not_mocked" in r.error, "not mocked error", r.error)

    r = await session.execute("asaas/refund_payment", {"id": "pay_test_42"})
    check(r.success is False, "denied fails", r)
    check(r.error.startswith("403:") and "no_refunds" in r.error, "denied error", r.error)

    # approval_required is a 202: a non-success ToolResult whose data is the envelope,
    # so the SDK's own guard finds the approval id there.
    r = await session.execute("asaas/create_payment", {"value": 5000})
    check(r.success is False, "approval is not a success", r)
    check(is_approval_required(r.data), "is_approval_required(result.data)", r)
    check(r.data["approval_id"].startswith("apr_"), "approval_id in data", r.data)
    check(r.error == "approval_required", "held error", r.error)
    check(r.tool == "asaas/create_payment" and r.server == "asaas", "held tool", r)

    # The raw bodies pass the SDK's own envelope guards.
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=BASE, headers=headers) as http:
        url = f"/v1/sessions/{session.id}/execute"
        body = {"tool": "asaas/create_payment", "input": {"value": 5000}}
        res = await http.post(url, json=body)
        check(res.status_code == 202, "approval status", res.status_code)
        envelope = res.json()
        check(is_approval_required(envelope), "is_approval_required", envelope)
        check(envelope["data"]["approval_id"] == envelope["approval_id"], "same id in data", envelope)
        res = await http.post(url, json={"tool": "asaas/refund_payment", "input": {}})
        check(res.status_code == 403 and is_policy_denied(res.json()), "is_policy_denied", res.text)
        check(res.json()["rule_id"] == "no_refunds", "rule_id", res.text)
        res = await http.post(url, json={"tool": "nuvem-fiscal/create_nfe", "input": {}})
        check(res.status_code == 422 and is_mocks_exhausted(res.json()), "is_mocks_exhausted", res.text)
        res = await http.post(url, json={"tool": "zz/unknown", "input": {}})
        check(res.status_code == 422 and is_tool_not_mocked(res.json()), "is_tool_not_mocked", res.text)

        # Approve the held call: the replay returns the fixture.
        res = await http.post(f"/v1/approvals/{envelope['approval_id']}/approve")
        check(res.status_code == 200, "approve status", res.text)
        check(res.json()["replay"] == {"result": MOCKS["asaas/create_payment"]}, "replay", res.text)
        res = await http.post(f"/v1/approvals/{envelope['approval_id']}/deny")
        check(res.status_code == 409, "second decision", res.status_code)

    # tools() is the SDK's only tool listing (GET .../connections).
    tools = await session.tools()
    names = sorted(t.name for t in tools)
    check(
        names == sorted(list(MOCKS) + ["codespar_list_tools"]),
        "tools()",
        names,
    )
    check(all(t.server for t in tools), "tool servers", [t.server for t in tools])
    conns = await session.connections()
    check([c.id for c in conns] == ["asaas", "nuvem-fiscal"], "connections", conns)
    check(all(c.connected for c in conns), "connected", conns)
    r = await session.execute("codespar_list_tools", {})
    check(r.success and len(r.data["tools"]) == 4, "codespar_list_tools", r)

    await session.close()
    await session.close()  # safe to call twice
    r = await session.execute("asaas/create_payment", {"value": 1})
    check(r.success is False and r.error.startswith("404:"), "execute after close", r.error)


async def builtin_paths(cs):
    """codespar_* built-ins are mocked like any tool, so the SDK's wrappers work in test mode."""
    charge = {
        "id": "chg_1",
        "status": "PENDING",
        "amount": 125.0,
        "currency": "BRL",
        "method": "pix",
        "pix_copy_paste": "000201...",
    }
    session = await cs.create(
        "user_test",
        servers=["asaas"],
        mocks={"codespar_charge": charge, "codespar_discover": {"tools": []}},
    )
    result = await session.charge(
        ChargeArgs(
            amount=125.0,
            currency="BRL",
            method="pix",
            description="Order 42",
            buyer=ChargeBuyer(name="Ana"),
        )
    )
    check(isinstance(result, ChargeResult), "charge() result type", result)
    check(result.id == "chg_1" and result.status == "PENDING", "charge() mocked result", result)
    check(result.amount == 125.0 and result.method == "pix", "charge() fields", result)
    check(result.pix_copy_paste == "000201...", "charge() pix", result)
    # An undeclared built-in is not mocked: the wrapper raises like on any failure.
    try:
        await session.ship(ShipArgs(action="track", tracking_code="BR123"))
        check(False, "ship() without a mock raises")
    except ApiError as exc:
        check("tool_not_mocked" in str(exc), "ship() not mocked", str(exc))
    r = await session.execute("codespar_list_tools", {})
    names = sorted(t["name"] for t in r.data["tools"])
    check(names == ["codespar_charge", "codespar_discover", "codespar_list_tools"], "built-ins listed", names)
    await session.close()

    # codespar_list_tools stays built in: declaring it is refused.
    try:
        await cs.create("user_test", servers=["asaas"], mocks={"codespar_list_tools": {}})
        check(False, "mocking codespar_list_tools is refused")
    except ApiError as exc:
        check(exc.status == 400 and exc.code == "mocks_invalid", "list_tools not mockable", (exc.status, exc.code))


async def send_paths(cs):
    session = await new_session(cs)
    result = await session.send("Charge R$5 via Pix")
    check(result.message == "Charged pay_test_42", "send message", result.message)
    check(result.iterations == 2, "send iterations", result.iterations)
    check(len(result.tool_calls) == 4, "send tool calls", result.tool_calls)
    ok, held, denied, missing = result.tool_calls
    check(ok.status == "success" and ok.output == MOCKS["asaas/create_payment"], "send ok", ok)
    check(ok.server_id == "asaas" and ok.tool_name == "asaas/create_payment", "send record", ok)
    check(ok.id.startswith("call_") and ok.error_code is None, "send record id", ok)
    check(is_approval_required(held.output) and held.error_code == "approval_required", "send held", held)
    check(held.status == "error", "held status", held.status)
    check(is_policy_denied(denied.output) and denied.output["rule_id"] == "no_refunds", "send denied", denied)
    check(is_tool_not_mocked(missing.output), "send missing", missing)
    await session.close()

    # Every SSE frame type reaches the SDK's parser.
    session = await new_session(cs)
    seen = []
    async for event in session.send_stream("Charge R$5 via Pix"):
        seen.append(event)
    types = [e.type for e in seen]
    check(
        types
        == ["user_message"]
        + ["tool_use", "tool_result"] * 4
        + ["assistant_text", "done"],
        "stream frame types",
        types,
    )
    check(seen[0].content == "Charge R$5 via Pix", "user_message", seen[0])
    check(seen[1].name == "asaas/create_payment" and seen[1].input == {"value": 5}, "tool_use", seen[1])
    check(seen[2].tool_call.id == seen[1].id, "tool_result id", seen[2])
    check(seen[2].tool_call.output == MOCKS["asaas/create_payment"], "tool_result output", seen[2])
    check(is_approval_required(seen[4].tool_call.output), "streamed envelope", seen[4])
    check(seen[9].content == "Charged pay_test_42" and seen[9].iteration == 1, "assistant_text", seen[9])
    done = seen[10].result
    check(done.message == "Charged pay_test_42" and done.iterations == 2, "done", done)
    check(len(done.tool_calls) == 4, "done tool calls", done.tool_calls)
    await session.close()

    # Model calls are counted per session: call 0 fails the stream, call 1 the send.
    fails = [{"step": 0, "error": "Rate limited"}, {"step": 1, "error": "Rate limited"}]
    session = await new_session(cs, {"fail_on_step": fails})
    seen = [event async for event in session.send_stream("hi")]
    check([e.type for e in seen] == ["user_message", "error"], "error stream", seen)
    check(seen[1].error == "agent_failed" and seen[1].message == "Rate limited", "error frame", seen[1])
    try:
        await session.send("hi again")
        check(False, "a failing send raises")
    except ApiError as exc:
        check(exc.status == 503 and exc.code == "agent_failed", "send failure code", (exc.status, exc.code))
    await session.close()


async def error_codes(cs):
    async def create_error(**kwargs):
        try:
            await cs.create("user_test", **kwargs)
        except ApiError as exc:
            return exc
        check(False, "create should fail", kwargs)

    exc = await create_error(servers=["asaas"], mocks={"asaas__create_payment": {}})
    check(exc.status == 400 and exc.code == "mocks_invalid", "mocks_invalid", (exc.status, exc.code))
    check(exc.body["field"] == "/mocks/asaas__create_payment", "mocks_invalid field", exc.body)
    exc = await create_error(servers=["asaas"], mocks={"asaas/x": {"pad": "x" * 70_000}})
    check(exc.status == 413 and exc.code == "mocks_payload_too_large", "too large", (exc.status, exc.code))

    wrong = AsyncCodeSpar(api_key="csk_test_wrong_key", base_url=BASE)
    try:
        await wrong.create("user_test", servers=["asaas"])
        check(False, "a wrong key is refused")
    except ApiError as exc:
        check(exc.status == 401 and exc.code == "unauthorized", "401", (exc.status, exc.code))
    await wrong.aclose()


async def tenancy():
    a = AsyncCodeSpar(api_key=KEY, project_id="prj_AAAAAAAAAAAAAAAA")
    b = AsyncCodeSpar(api_key=KEY, project_id="prj_BBBBBBBBBBBBBBBB")
    session = await a.create("user_test", servers=["asaas", "nuvem-fiscal"], mocks=MOCKS)
    r = await session.execute("asaas/create_payment", {"value": 1})
    check(r.success, "tenant A executes", r)
    # Project B addresses the same session id: not found.
    foreign = await b.create("user_test", servers=["asaas", "nuvem-fiscal"], mocks=MOCKS)
    foreign.info.id = session.id
    r = await foreign.execute("asaas/create_payment", {"value": 1})
    check(r.success is False and r.error.startswith("404:"), "tenant isolation", r.error)
    await a.aclose()
    await b.aclose()


async def main():
    check(codespar.__version__ == "0.14.0", "SDK version", codespar.__version__)
    async with AsyncCodeSpar(api_key=KEY) as cs:
        check(cs.base_url == BASE.rstrip("/"), "base url from CODESPAR_BASE_URL", cs.base_url)
        await execute_paths(cs)
        await builtin_paths(cs)
        await send_paths(cs)
        await error_codes(cs)
    await tenancy()
    print(f"sdk compat: {CHECKS} checks passed")


asyncio.run(main())
