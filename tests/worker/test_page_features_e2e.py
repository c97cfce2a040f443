# ruff: noqa: E501  (page markup and scripts read better unwrapped)
"""What real automations ask of a job (issue 38), end to end: moto, a real worker and
Chromium, pages on 127.0.0.1. Dialogs answered and reported; drag and drop; several files
in one upload; back and forward in a tab's history; a popup's tab switched to."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from pagefleet.jobs.states import JobStatus
from tests.worker.site_pages import Resource, html
from tests.worker.step_stack import Stack, step_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DIALOGS = html(
    """<body>
  <button id="delete" onclick="document.getElementById('deleted').textContent = confirm('Delete order 7?') ? 'deleted' : 'kept'">Delete</button>
  <button id="ask" onclick="document.getElementById('name').textContent = String(prompt('Your name?', 'anonymous'))">Ask</button>
  <button id="save" onclick="alert('Saved!'); document.getElementById('saved').textContent = 'after alert'">Save</button>
  <span id="deleted"></span><span id="name"></span><span id="saved"></span>
</body>"""
)

DRAG = html(
    """<body style="margin:0">
  <div id="knob" style="position:absolute;left:20px;top:20px;width:40px;height:40px;background:#c00"></div>
  <div id="slot" style="position:absolute;left:300px;top:20px;width:80px;height:80px;background:#eee"></div>
  <div id="card" draggable="true" style="position:absolute;left:20px;top:200px;width:60px;height:40px;background:#0c0">card</div>
  <div id="bin" style="position:absolute;left:300px;top:200px;width:120px;height:80px;background:#ddd"></div>
  <span id="pointer"></span><span id="html5"></span>
  <script>
    // A pointer-driven slider knob: follows mousemove while the button is down.
    const knob = document.getElementById('knob'); let held = false;
    knob.addEventListener('mousedown', () => { held = true; });
    document.addEventListener('mousemove', e => { if (held) { knob.style.left = (e.clientX - 20) + 'px'; knob.style.top = (e.clientY - 20) + 'px'; } });
    document.addEventListener('mouseup', e => {
      if (!held) return; held = false;
      const slot = document.getElementById('slot').getBoundingClientRect();
      const inside = e.clientX >= slot.left && e.clientX <= slot.right && e.clientY >= slot.top && e.clientY <= slot.bottom;
      document.getElementById('pointer').textContent = inside ? 'in slot' : 'missed';
    });
    // HTML5 drag and drop: only dragstart/dragover/drop move the card.
    const bin = document.getElementById('bin');
    document.getElementById('card').addEventListener('dragstart', e => e.dataTransfer.setData('text/plain', 'card-1'));
    bin.addEventListener('dragover', e => e.preventDefault());
    bin.addEventListener('drop', e => { e.preventDefault(); document.getElementById('html5').textContent = 'dropped ' + e.dataTransfer.getData('text/plain'); });
  </script>
</body>"""
)

FILES = html(
    """<body>
  <input type="file" id="many" multiple onchange="document.getElementById('chosen').textContent = [...this.files].map(f => f.name + ':' + f.size).join(',')">
  <span id="chosen"></span>
</body>"""
)

# A form that asks before it is left with unsaved text (the usual "Leave site?" guard).
LEAVE = html(
    """<body><h1 id="where">editing</h1><input id="note"><a id="away" href="/first">away</a>
  <script>
    window.addEventListener('beforeunload', e => {
      if (document.getElementById('note').value) { e.preventDefault(); e.returnValue = ''; }
    });
  </script>
</body>"""
)

FIRST = html("""<body><h1 id="where">first</h1><a id="next" href="/second">next</a></body>""")
SECOND = html(
    """<body><h1 id="where">second</h1>
  <a id="popup" href="/third" target="_blank">open in a new tab</a>
  <button id="ask" onclick="document.getElementById('where').textContent = String(confirm('Leave the second page?'))">ask</button>
</body>"""
)
THIRD = html(
    """<body onload="alert('Welcome to the third page')"><h1 id="where">third</h1>
  <button id="ask" onclick="document.getElementById('where').textContent = prompt('Your name?')">ask</button>
</body>"""
)


def pages() -> dict[str, Resource]:
    return {
        "/dialogs": DIALOGS,
        "/drag": DRAG,
        "/files": FILES,
        "/leave": LEAVE,
        "/first": FIRST,
        "/second": SECOND,
        "/third": THIRD,
    }


@pytest.fixture(scope="module")
def stack(worker_moto_endpoint: str) -> Iterator[Stack]:
    with step_stack(worker_moto_endpoint, pages()) as s:
        yield s


def _extracts(*names: str) -> list[dict[str, Any]]:
    return [{"action": "extract", "name": n, "selector": f"#{n}"} for n in names]


def _dialog_events(stack: Stack, job: Any) -> list[dict[str, Any]]:
    return [e for e in stack.events(job) if e["type"] == "dialog"]


def test_dialogs_are_dismissed_by_default_and_each_is_a_run_event(stack: Stack) -> None:
    done = stack.run(
        {
            "steps": [
                {"action": "goto", "url": stack.site.url("/dialogs")},
                {"action": "click", "selector": "#delete"},
                {"action": "click", "selector": "#ask"},
                {"action": "click", "selector": "#save"},
                *_extracts("deleted", "name", "saved"),
            ]
        }
    )
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {"deleted": "kept", "name": "null", "saved": "after alert"}
    seen = [(e["dialog"], e["message"], e["outcome"]) for e in _dialog_events(stack, done)]
    assert seen == [
        ("confirm", "Delete order 7?", "dismissed"),
        ("prompt", "Your name?", "dismissed"),
        ("alert", "Saved!", "dismissed"),
    ]


def test_options_dialogs_accept_answers_confirm_and_prompt(stack: Stack) -> None:
    done = stack.run(
        {
            "options": {"dialogs": "accept", "prompt_text": "Ada"},
            "steps": [
                {"action": "goto", "url": stack.site.url("/dialogs")},
                {"action": "click", "selector": "#delete"},
                {"action": "click", "selector": "#ask"},
                *_extracts("deleted", "name"),
            ],
        }
    )
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {"deleted": "deleted", "name": "Ada"}
    assert {e["outcome"] for e in _dialog_events(stack, done)} == {"accepted"}


def test_a_dialog_step_answers_the_next_dialog_and_checks_its_message(stack: Stack) -> None:
    done = stack.run(
        {
            "steps": [
                {"action": "goto", "url": stack.site.url("/dialogs")},
                {"action": "dialog", "accept": True, "message_contains": "Delete order 7"},
                {"action": "click", "selector": "#delete"},
                {"action": "dialog", "accept": True, "prompt_text": "Grace", "type": "prompt"},
                {"action": "click", "selector": "#ask"},
                *_extracts("deleted", "name"),
            ]
        }
    )
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {"deleted": "deleted", "name": "Grace"}
    events = _dialog_events(stack, done)
    assert [(e["dialog"], e["outcome"], e["index"]) for e in events] == [
        ("confirm", "accepted", 1),
        ("prompt", "accepted", 3),
    ]


def test_a_dialog_with_another_message_is_dismissed_and_fails_the_job(stack: Stack) -> None:
    done = stack.run(
        {
            "steps": [
                {"action": "goto", "url": stack.site.url("/dialogs")},
                {"action": "dialog", "accept": True, "message_contains": "Delete order 8"},
                {"action": "click", "selector": "#delete"},
                *_extracts("deleted"),
            ]
        }
    )
    assert done.status is JobStatus.FAILED
    assert done.error is not None and done.error.kind == "assertion_failed"
    assert done.error.step_index == 2  # the click that opened it
    assert "Delete order 7?" in done.error.message and "Delete order 8" in done.error.message
    # never confirmed: the OK was meant for another question
    assert [e["outcome"] for e in _dialog_events(stack, done)] == ["dismissed"]


def test_a_dialog_step_whose_dialog_never_comes_fails_at_that_step(stack: Stack) -> None:
    done = stack.run(
        {
            "steps": [
                {"action": "goto", "url": stack.site.url("/dialogs")},
                {"action": "dialog", "accept": True},
                {"action": "extract", "name": "deleted", "selector": "#deleted"},
            ]
        }
    )
    assert done.status is JobStatus.FAILED
    assert done.error is not None and done.error.kind == "assertion_failed"
    assert done.error.step_index == 1 and "none came" in done.error.message


def _leave_with_unsaved_text() -> list[dict[str, Any]]:
    return [
        {"action": "click", "selector": "#note"},
        {"action": "type", "selector": "#note", "text": "draft"},
        {"action": "click", "selector": "#away"},
    ]


def test_a_beforeunload_is_dismissed_by_default_and_a_dialog_step_leaves_the_page(
    stack: Stack,
) -> None:
    done = stack.run(
        {
            "steps": [
                {"action": "goto", "url": stack.site.url("/leave")},
                *_leave_with_unsaved_text(),  # dismissed: the page stays
                {"action": "extract", "name": "stayed", "selector": "#where"},
                {"action": "dialog", "accept": True, "type": "beforeunload"},
                {"action": "click", "selector": "#away"},
                {"action": "wait_for", "selector": "#next"},  # the page it went to
                {"action": "extract", "name": "left", "selector": "#where"},
            ]
        }
    )
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {"stayed": "editing", "left": "first"}
    events = _dialog_events(stack, done)
    assert [(e["dialog"], e["outcome"], e.get("index")) for e in events] == [
        ("beforeunload", "dismissed", None),
        ("beforeunload", "accepted", 5),
    ]


def test_options_dialogs_accept_lets_a_beforeunload_page_be_left(stack: Stack) -> None:
    done = stack.run(
        {
            "options": {"dialogs": "accept"},
            "steps": [
                {"action": "goto", "url": stack.site.url("/leave")},
                *_leave_with_unsaved_text(),
                {"action": "wait_for", "selector": "#next"},
                {"action": "extract", "name": "left", "selector": "#where"},
            ],
        }
    )
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {"left": "first"}
    assert [(e["dialog"], e["outcome"]) for e in _dialog_events(stack, done)] == [
        ("beforeunload", "accepted")
    ]


def test_drag_moves_a_pointer_driven_knob_and_fires_html5_drop(stack: Stack) -> None:
    done = stack.run(
        {
            "steps": [
                {"action": "goto", "url": stack.site.url("/drag")},
                {"action": "drag", "selector": "#knob", "target": "#slot"},
                {
                    "action": "drag",
                    "selector": "#card",
                    "target": "#bin",
                    "target_position": {"x": 10, "y": 10},
                },
                *_extracts("pointer", "html5"),
            ]
        }
    )
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {"pointer": "in slot", "html5": "dropped card-1"}


def test_one_upload_sets_several_files_from_inputs_or_the_step(stack: Stack) -> None:
    done = stack.run(
        {
            "inputs": {"notes": "hello"},
            "steps": [
                {"action": "goto", "url": stack.site.url("/files")},
                {
                    "action": "upload",
                    "selector": "#many",
                    "files": [
                        {"input": "notes", "filename": "notes.txt", "content_type": "text/plain"},
                        # carried in the step itself, as a browser session's upload is
                        {
                            "content": base64.b64encode(b"\x00\x01\x02\x03").decode(),
                            "filename": "blob.bin",
                            "encoding": "base64",
                        },
                    ],
                },
                {"action": "wait_for", "selector": "#chosen:not(:empty)"},
                *_extracts("chosen"),
            ],
        }
    )
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {"chosen": "notes.txt:5,blob.bin:4"}


def test_the_dialog_drag_and_upload_examples_succeed_on_the_demo_site(stack: Stack) -> None:
    jobs = stack.run_examples(("interaction-dialogs", "interaction-drag-upload"))
    for name, job in jobs.items():
        assert job.status is JobStatus.SUCCEEDED, (name, job.error)
    assert jobs["interaction-dialogs"].result == {
        "status": "deleted Old draft",
        "task": "Write the final report",
    }
    assert jobs["interaction-drag-upload"].result == {
        "done": ["Write report"],
        "attached": ["minutes.txt (30 bytes)", "logo.png (8 bytes)"],
    }


def test_back_forward_and_a_new_tab_switched_to_and_from(stack: Stack) -> None:
    where = {"action": "extract", "selector": "#where", "many": True}
    done = stack.run(
        {
            "steps": [
                {"action": "goto", "url": stack.site.url("/first")},
                {"action": "click", "selector": "#next"},
                {"action": "wait_for", "url": "**/second"},
                {"action": "back"},
                {**where, "name": "after_back"},
                {"action": "forward"},
                {**where, "name": "after_forward"},
                {"action": "click", "selector": "#popup"},
                # The new tab opens on its own time: switch_tab waits for it.
                {"action": "switch_tab", "url_contains": "/third"},
                {"action": "wait_for", "selector": "#where"},
                # A dialog on the switched-to tab is answered as the first tab's are.
                {"action": "dialog", "accept": True, "prompt_text": "Ada"},
                {"action": "click", "selector": "#ask"},
                {**where, "name": "in_new_tab"},
                {"action": "switch_tab", "index": 0},
                {"action": "dialog", "accept": False, "type": "confirm"},
                {"action": "click", "selector": "#ask"},
                {**where, "name": "back_in_first_tab"},
            ]
        }
    )
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {
        "after_back": ["first"],
        "after_forward": ["second"],
        "in_new_tab": ["Ada"],
        "back_in_first_tab": ["false"],
    }
    seen = [(e["dialog"], e["outcome"]) for e in _dialog_events(stack, done)]
    # The new tab's alert as it loaded: answered (options.dialogs) and reported, though
    # no step acted on that tab yet.
    assert seen == [("alert", "dismissed"), ("prompt", "accepted"), ("confirm", "dismissed")]


def test_forward_with_nothing_ahead_and_a_tab_that_never_opens_fail_at_their_step(
    stack: Stack,
) -> None:
    ahead = stack.run(
        {"steps": [{"action": "goto", "url": stack.site.url("/first")}, {"action": "forward"}]}
    )
    assert ahead.status is JobStatus.FAILED
    assert ahead.error is not None and ahead.error.step_index == 1, ahead.error
    assert "no page to go forward to" in ahead.error.message
    never = stack.run(
        {
            "steps": [
                {"action": "goto", "url": stack.site.url("/first")},
                {"action": "switch_tab", "index": 1, "timeout_ms": 300},
            ]
        }
    )
    assert never.status is JobStatus.FAILED
    assert never.error is not None and never.error.step_index == 1, never.error
    assert "no tab with index 1" in never.error.message and "/first" in never.error.message
