"""A live view's frames as the worker posts them to a job's watchers (pagefleet.live.watch).

A frame is one JPEG, sized to fit ``FRAME_MAX_WIDTH`` x ``FRAME_MAX_HEIGHT``, base64 in at
most ``FRAME_MAX_PARTS`` messages of at most ``PART_MAX_BYTES`` each, so that every
message fits one WebSocket frame of API Gateway (32 KB) and a frame's messages stay far
under its 128 KB message: ``{"type": "frame", "job_id", "seq", "part", "parts", "width",
"height", "data"}``; a viewer joins a frame's parts by ``seq`` and shows it when all came.
"""

from __future__ import annotations

from pagefleet.live.messages import dumps

FRAME_MAX_WIDTH, FRAME_MAX_HEIGHT = 960, 640
# One message's bytes, under API Gateway's 32 KB WebSocket frame with room for the envelope.
PART_MAX_BYTES = 30 * 1024
_ENVELOPE_BYTES = 512
FRAME_MAX_PARTS = 4


def frame_messages(job_id: str, seq: int, data_b64: str, *, width: int, height: int) -> list[bytes]:
    """One screencast frame as the messages posted to a watcher, each under a WebSocket
    frame; empty when the frame needs more than ``FRAME_MAX_PARTS`` of them (the sender
    lowers its quality and skips it)."""
    size = PART_MAX_BYTES - _ENVELOPE_BYTES
    chunks = [data_b64[i : i + size] for i in range(0, len(data_b64), size)] or [""]
    if len(chunks) > FRAME_MAX_PARTS:
        return []
    return [
        dumps(
            {
                "type": "frame",
                "job_id": job_id,
                "seq": seq,
                "part": index,
                "parts": len(chunks),
                "width": width,
                "height": height,
                "data": chunk,
            }
        )
        for index, chunk in enumerate(chunks)
    ]
