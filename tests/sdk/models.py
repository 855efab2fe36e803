"""Drives a spyglass session backed by a real-model provider (a fake OpenAI-compatible
server the Rust test runs) with the real CodeSpar Python SDK (codespar==0.14.0): `send`
then `send_stream`, the model choosing the mocked tool each time, then a `send_stream`
whose provider stream is cut after one text delta.

Run by tests/e2e/sdk_models.rs with CODESPAR_BASE_URL and CODESPAR_API_KEY set.
Exits non-zero, naming the check, on the first mismatch.
"""

import asyncio
import os
import sys

from codespar import AsyncCodeSpar

CHECKS = 0


def check(condition, what, detail=None):
    global CHECKS
    CHECKS += 1
    if not condition:
        print(f"MISMATCH: {what}" + (f": {detail!r}" if detail is not None else ""))
        sys.exit(1)


MOCKS = {"asaas/create_payment": {"id": "pay_1", "status": "PENDING"}}


async def main():
    async with AsyncCodeSpar(api_key=os.environ["CODESPAR_API_KEY"], base_url=os.environ["CODESPAR_BASE_URL"]) as cs:
        session = await cs.create(
            "user_test",
            servers=["asaas"],
            metadata={"model": "openai:gpt-4o-mini"},
            mocks=MOCKS,
        )
        result = await session.send("Charge R$5")
        check(result.message == "Charged pay_1", "send message", result.message)
        check(result.iterations == 2, "send iterations", result.iterations)
        check(len(result.tool_calls) == 1, "send tool calls", result.tool_calls)
        call = result.tool_calls[0]
        check(call.tool_name == "asaas/create_payment" and call.output == MOCKS["asaas/create_payment"], "send call", call)

        seen = [event async for event in session.send_stream("Charge R$5 again")]
        types = [e.type for e in seen]
        check(
            types == ["user_message", "assistant_text", "assistant_text", "tool_use", "tool_result",
                      "assistant_text", "assistant_text", "done"],
            "stream frame types",
            types,
        )
        deltas = [e.content for e in seen if e.type == "assistant_text"]
        check(deltas == ["Let me ", "charge", "Charged ", "pay_1"], "stream deltas", deltas)
        check(seen[3].name == "asaas/create_payment" and seen[3].input == {"value": 5}, "tool_use", seen[3])
        check(seen[4].tool_call.output == MOCKS["asaas/create_payment"], "tool_result", seen[4])
        check(seen[7].result.message == "Charged pay_1", "done", seen[7].result)

        # The provider's stream is cut after one text delta: the SDK's stream ends with
        # the error frame, after the text it already got (never a hang, never a silent end).
        seen = [event async for event in session.send_stream("Charge R$5 once more")]
        types = [e.type for e in seen]
        check(types == ["user_message", "assistant_text", "error"], "broken stream frame types", types)
        check(seen[1].content == "Charging", "broken stream delta", seen[1])
        check(seen[2].error == "agent_failed", "broken stream error code", seen[2])
        check(
            seen[2].message.startswith("openai: the stream broke after 1 text delta: "),
            "broken stream error message",
            seen[2].message,
        )
        await session.close()
    print(f"{CHECKS} checks passed")


asyncio.run(main())
