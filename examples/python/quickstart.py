"""Drive `spyglass serve` with the real CodeSpar Python SDK, unchanged.

    spyglass serve --test-mode --policy examples/demo-policy.toml &
    pip install codespar==0.14.0
    CODESPAR_BASE_URL=http://127.0.0.1:8000 CODESPAR_API_KEY=csk_test_local \
        python examples/python/quickstart.py

Open `spyglass` (it reads CODESPAR_BASE_URL too) in another terminal to watch the
session, its mock counters, the held payment and the agent run appear live.
"""

import asyncio
import json
import os

from codespar import AsyncCodeSpar, is_approval_required, is_tool_not_mocked

# The fake model `send` talks to: call a tool, then answer. Python's SDK forwards only
# servers, user_id, metadata and mocks, so the script travels as metadata.model_script.
MODEL = {
    "sequence": [
        {"tool_calls": [{"name": "nuvem-fiscal/create_nfe", "arguments": {"payment": "pay_test_42"}}]},
        {"text": "Issued the NF-e for pay_test_42."},
    ]
}


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
