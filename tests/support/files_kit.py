"""Files in tests (issue 45): a real PNG, a tool that attaches it, a model that calls it."""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path

from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from conftest import ext_code


def png(width: int = 3, height: int = 2) -> bytes:
    """A real PNG of ``width`` x ``height`` red pixels (browsers decode it)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body))
            + kind
            + body
            + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
        )

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def read(path: str) -> bytes:
    return Path(path).read_bytes()


CHART_HEADER = """
    from agents import function_tool

    from core.extensions.contract import Artifact, attach
    from core.extensions.sdk import side_effects
"""
CHART_TOOL = """
    def get_tools(self):
        @function_tool
        def chart() -> str:
            "Draw the chart."
            attach(Artifact("chart.png", "image/png", data=PNG, caption="the chart"))
            return "chart drawn"

        return [side_effects(chart, False)]
"""


def chart_code() -> str:
    return ext_code(CHART_TOOL, CHART_HEADER).replace(
        "\nclass Ext", f"\nPNG = {png()!r}\n\nclass Ext", 1
    )


def chart_model() -> ScriptedModel:
    return ScriptedModel(
        [
            ModelStep(output=[function_call("chart", {}, call_id="c1")]),
            ModelStep(output=[assistant_message("here it is")]),
        ]
    )


def pdf(text: str) -> bytes:
    """A one-page PDF whose page says ``text`` (readable by ``pypdf``)."""
    stream = f"BT /F1 12 Tf 20 100 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 144] "
        b"/Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def sent_picture(model: ScriptedModel) -> tuple[str, dict[str, str]]:
    """The text and the image part of the last user message of the model's first
    call: how a picture a person sent reached the model."""
    users = [i for i in model.calls[0].input if isinstance(i, dict) and i.get("role") == "user"]
    assert not isinstance(users[-1]["content"], str), users[-1]["content"]
    text, image = users[-1]["content"]
    assert text["type"] == "input_text" and image["type"] == "input_image"
    return text["text"], image


def data_url(data: bytes, mime_type: str) -> str:
    return f"data:{mime_type};base64," + base64.b64encode(data).decode()
