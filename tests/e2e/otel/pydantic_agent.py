"""A Pydantic AI agent on a FunctionModel (no network) calling one tool that works and one
that raises, instrumented, its spans exported to OTEL_EXPORTER_OTLP_ENDPOINT by the stock
OTLP exporter (HTTP/protobuf, or gRPC when OTLP_PROTOCOL=grpc). Prints RUN_FAILED: <error>."""

import os

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.usage import RequestUsage

if os.environ.get("OTLP_PROTOCOL") == "grpc":
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
else:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter


def exporter():
    capture = os.environ.get("SPYGLASS_OTLP_CAPTURE")
    if os.environ.get("OTLP_PROTOCOL") == "grpc" or not capture:
        return OTLPSpanExporter()
    import requests

    class Capturing(requests.Session):
        """Keeps each request body as sent, for the fixtures of the unit tests."""

        count = 0

        def request(self, method, url, *args, **kwargs):
            Capturing.count += 1
            os.makedirs(capture, exist_ok=True)
            with open(os.path.join(capture, f"{Capturing.count:02d}.pb"), "wb") as f:
                f.write(kwargs.get("data") or b"")
            return super().request(method, url, *args, **kwargs)

    return OTLPSpanExporter(session=Capturing())


provider = TracerProvider(resource=Resource.create({"service.name": "pydantic-weather"}))
# Several small exports: the root comes in a later request than its children.
provider.add_span_processor(BatchSpanProcessor(exporter(), max_export_batch_size=2))


def model(messages, info: AgentInfo) -> ModelResponse:
    calls = sum(
        1 for m in messages for p in getattr(m, "parts", []) if p.part_kind == "tool-return"
    )
    usage = RequestUsage(input_tokens=11 + calls, output_tokens=7)
    if calls == 0:
        return ModelResponse(
            parts=[ToolCallPart("get_weather", {"city": "Oslo"}, tool_call_id="call_weather")],
            usage=usage,
            model_name="weather-fn",
        )
    if calls == 1:
        return ModelResponse(
            parts=[ToolCallPart("explode", {"why": "test"}, tool_call_id="call_explode")],
            usage=usage,
            model_name="weather-fn",
        )
    return ModelResponse(parts=[TextPart("done")], usage=usage, model_name="weather-fn")


Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
agent = Agent(FunctionModel(model, model_name="weather-fn"), name="weather_agent")


@agent.tool_plain
def get_weather(city: str) -> dict:
    return {"city": city, "temp_c": 21}


@agent.tool_plain
def explode(why: str) -> str:
    raise RuntimeError(f"the explode tool failed: {why}")


try:
    agent.run_sync("What is the weather in Oslo?")
    print("RUN_OK")
except Exception as err:  # noqa: BLE001 - the failure is the point
    print(f"RUN_FAILED: {err}")
finally:
    provider.force_flush()
    provider.shutdown()
