"""Drive `spyglass serve` with the real CodeSpar Python SDK, unchanged.

    spyglass serve --test-mode --policy examples/demo-policy.toml   # terminal 1
    spyglass --url http://127.0.0.1:8000                            # terminal 2
    pip install codespar==0.14.0
    CODESPAR_BASE_URL=http://127.0.0.1:8000 CODESPAR_API_KEY=csk_test_local \
        python examples/python/quickstart.py

The inspector shows the session, its mock counters, the held payment and the agent run
live. Run from a terminal, the script waits for the held payment's decision: approve it
in the inspector's Approvals tab (`a`; `d` denies) or with the curl line it prints.
Without a terminal (CI) it says where to approve and goes on; QUICKSTART_WAIT=1 makes
it wait there too.
"""

import asyncio
import json
import os
import sys
import urllib.request

from codespar import AsyncCodeSpar, is_approval_required, is_tool_not_mocked

# The fake model `send` talks to: call a tool, then answer. Python's SDK forwards only
# servers, user_id, metadata and mocks, so the script travels as metadata.model_script.
MODEL = {
    "sequence": [
        {"tool_calls": [{"name": "nuvem-fiscal/create_nfe", "arguments": {"payment": "pay_test_42"}}]},
        {"text": "Issued the NF-e for pay_test_42."},
    ]
}


def approval_status(base, key, approval_id):
    """The approval's status as `GET /v1/approvals?status=all` lists it."""
    request = urllib.request.Request(
        f"{base}/v1/approvals?status=all&limit=1000",
        headers={"authorization": f"Bearer {key}"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        listed = json.load(answer)["approvals"]
    return next((a for a in listed if a["id"] == approval_id), {}).get("status", "unknown")


async def wait_for_decision(approval_id):
    """Tells where to decide the held call and, from a terminal, waits for the decision."""
    base = os.environ.get("CODESPAR_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
    key = os.environ.get("CODESPAR_API_KEY", "csk_test_local")
    print("  approve it in the inspector's Approvals tab (select it, press a), or:")
    print(
        f"  curl {base}/v1/approvals/{approval_id}/approve"
        " -H 'content-type: application/json' -d '{}'"
    )
    if not (sys.stdin.isatty() or os.environ.get("QUICKSTART_WAIT") == "1"):
        return
    print("  waiting for the decision (Ctrl-C stops)...", flush=True)
    status = "pending"
    while status == "pending":
        await asyncio.sleep(1)
        status = await asyncio.to_thread(approval_status, base, key, approval_id)
    print("large payment:", status)


async def main():
    cs = AsyncCodeSpar(api_key=os.environ.get("CODESPAR_API_KEY", "csk_test_local"))
    session = await cs.create(
        "user_test",
        servers=["asaas", "nuvem-fiscal"],
        metadata={"model_script": json.dumps(MODEL)},
        mocks={
            # Static: the same fixture on every call.
            "asaas/create_payment": {"id": "pay_test_42", "status": "PENDING"},
            # Stateful: consumed in order, then mocks_exhausted.
            "nuvem-fiscal/create_nfe": [{"id": "nfe_1"}, {"id": "nfe_2"}],
        },
    )
    print("session", session.id)

    paid = await session.execute("asaas/create_payment", {"value": 100})
    print("payment", paid.data["id"], paid.data["status"])

    typo = await session.execute("asaas/create_paymet", {"value": 100})
    print("misspelled tool:", typo.error)

    # Over the policy's threshold: the runtime answers 202 approval_required and queues the
    # call; there is no result until someone approves it in the inspector's Approvals tab.
    # The envelope is the result's data, so the SDK's own guard reads the approval id.
    held = await session.execute("asaas/create_payment", {"value": 5000})
    if is_approval_required(held.data):
        print("large payment: held for approval", held.data["approval_id"])
        await wait_for_decision(held.data["approval_id"])
    else:
        print("large payment:", held)

    result = await session.send("Issue the invoice for pay_test_42")
    print("agent said:", result.message)
    for call in result.tool_calls:
        code = call.output.get("code") if isinstance(call.output, dict) else None
        print(" ", call.tool_name, call.status, code or call.output.get("id"))
        assert not is_tool_not_mocked(call.output)

    await session.close()
    print("closed")


asyncio.run(main())
