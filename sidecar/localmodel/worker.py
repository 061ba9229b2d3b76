"""The local model's worker: a child process of the sidecar that owns openvino-genai (the sidecar never imports it).

``python -m sidecar.localmodel.worker`` speaks the one worker protocol (:mod:`sidecar.workers.protocol`):
requests on stdin, answers on stdout (the real stdout is kept private; anything a library prints goes to
stderr). A hello first, then one job at a time, in order:

* ``load`` (``root``, ``path``?, ``prepared``?, ``slot``?, ``threads``?, ``precision``?) → ``progress`` (stage,
  ``fraction``), then a result (``context_window``, timings). ``slot`` ``"arguments"`` loads the arguments model
  (:data:`assets.ARGUMENTS_SHA256`) beside the main one instead of in its place;
* ``generate`` (``slot``?, ``messages``, ``tools``?, ``max_tokens``?, ``temperature``?, ``top_p``?, ``stop``?,
  ``json_schema``? or ``regex``?, ``prefix``?, ``score``?, ``stop_on_loop``?) → ``delta`` lines, then a result
  (real token counts from the runtime, ``finish``, timings). ``slot`` ``"arguments"`` runs it on the arguments
  model. ``prefix`` is the start of the assistant's reply, written after the chat template's generation prompt
  (the model continues it); ``json_schema`` / ``regex`` constrain what it writes (a schema as the compact grammar
  :func:`.jsongrammar.compact_grammar` writes where it can: no whitespace but ``": "`` and ``", "``, numbers of
  bounded length); ``score`` adds ``score``: the log-probability the model gave the tokens it wrote
  (unconstrained: the model's own confidence, not the constraint's); ``stop_on_loop`` ends the generation when
  its output falls into a loop (:class:`LoopGuard`; ``finish``: ``loop``).
* a ``cancel`` stops that generation at its next token (or before it starts)

Any failure of a job answers an ``error`` with ``model_unavailable``, ``context_length_exceeded``,
``bad_request`` or ``runtime_error``. The worker exits on stdin EOF (the sidecar closed the pipe or died) and
when its parent process changes (the sidecar was killed).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from ..workers.io import claim_stdout, exit_with_parent
from ..workers.protocol import Cancel, Request, WorkerOutput, read_requests
from . import assets, convert
from .jsongrammar import compact_grammar

META_FILE = "metona-model.json"
EXPRESSION_REPEATS = 8
"""Repeats of a unit that looks like a piece of arithmetic (a digit and ``+``, ``*``, ``/`` or a spaced ``-``:
``" / 60"``) that end a generation: such output does not repeat itself legitimately."""
CONTENT_REPEATS = 128
"""Repeats of any other unit of 1–16 characters that end a generation: far more than legitimate content repeats a
short unit (a Markdown table's ``| --- ``, a checklist's ``- [ ] ``, a CSV row of zeros), and a runaway number
(``1000000…``) is caught here too."""
DIGIT_REPEATS = 48
"""Repeats of a unit of two or more different digits only (``1234567890``) that end a generation: a string of digits
that starts over. At :data:`CONTENT_REPEATS` a promo code the model made up, ``"1234567890" * 128``, ran ~1,300
digit tokens before it was stopped (867 s for one tool call on 2 cores under load, BFCL's real users' no-call kind,
a tuning case, 2026-12-06); digits the user asks for seldom repeat one run so often (a test card's ``4242 4242
4242 4242`` is eight; 1/7 to 150 places, 25 of ``142857``; a 64-bit alternating mask, 32 of ``10``)."""
MAX_UNIT = 16
LONG_REPEATS = 16
"""Repeats of a longer unit (17–:data:`MAX_LONG_UNIT` characters, not itself a repeat of a shorter one) that end a
generation: a list that starts over (``"…, urban design, park design, residential design, …"``, measured: an
argument that ran to the 4096-token limit, 261 s) repeats a phrase; a document seldom repeats a whole long line
sixteen times in a row (a CSV's rows of zeros, a template's empty rows: a dozen are kept)."""
MAX_LONG_UNIT = 128
LOOP_TAIL = max(MAX_UNIT * CONTENT_REPEATS, MAX_LONG_UNIT * LONG_REPEATS)
"""Characters of the latest output that :class:`LoopGuard` looks at."""
_EXPRESSION = re.compile(r"(?=.*\d)(?=.*(?:[+*/]| - ))", re.DOTALL)


def repeats_at_end(text: str, size: int, most: int) -> int:
    """How many times (at most ``most``) ``text`` ends with its last ``size`` characters in a row."""
    unit = text[-size:]
    count = 0
    end = len(text)
    while count < most and end >= size and text[end - size : end] == unit:
        count += 1
        end -= size
    return count


class LoopGuard:
    """Tells when a generation has fallen into a loop: its output ends with the same unit of 1–16 characters
    repeated :data:`EXPRESSION_REPEATS` times when the unit is a piece of arithmetic (``17.5 * 60 / 60 / 60 …``,
    seen in the 0.5B model's tool arguments: greedy decoding never leaves such a loop, and it ran to the token
    limit), :data:`DIGIT_REPEATS` times when it is a run of different digits (``1234567890…``) in a call's
    arguments (``arguments``: a job constrained by a JSON schema; a file's content, written as text, keeps the
    content bar: 1/7 to 300 places is 50 of ``142857``), else
    :data:`CONTENT_REPEATS` times (a file's content legitimately repeats a short unit a few dozen
    times: eight repeats ended a Markdown table's separator row), or with a longer unit repeated
    :data:`LONG_REPEATS` times. A job's ``stop_on_loop`` ends its generation
    there (``finish``: ``loop``)."""

    def __init__(self, *, arguments: bool = False) -> None:
        self.tail = ""
        self.arguments = arguments

    def feed(self, text: str) -> bool:
        self.tail = (self.tail + text)[-LOOP_TAIL:]
        if any(self._loops(size) for size in range(1, MAX_UNIT + 1)):
            return True
        tail = self.tail
        for size in range(MAX_UNIT + 1, min(MAX_LONG_UNIT, len(tail) // LONG_REPEATS) + 1):
            unit = tail[-size:]
            if tail[-2 * size : -size] == unit and unit not in (unit + unit)[1:-1]:  # repeated, and primitive
                if repeats_at_end(tail, size, LONG_REPEATS) >= LONG_REPEATS:
                    return True
        return False

    def _loops(self, size: int) -> bool:
        unit = self.tail[-size:]
        if len(unit) < size:
            return False
        if size > 1 and len(set(unit)) == 1:
            return False  # "----": counted once, as a unit of one character
        if size > 1 and _EXPRESSION.match(unit):
            need = EXPRESSION_REPEATS
        elif size > 1 and unit.isdigit() and self.arguments:
            need = DIGIT_REPEATS  # a run of digits that starts over
        else:
            need = CONTENT_REPEATS
        return repeats_at_end(self.tail, size, need) >= need


class Worker:
    def __init__(self, out: WorkerOutput) -> None:
        self.out = out
        self._jobs: queue.Queue[Request | None] = queue.Queue()
        self._cancelled: set[str] = set()
        self._current: str | None = None
        self._slots: dict[str, Loaded] = {}
        """What is loaded: ``main`` (the model every generation uses) and ``arguments`` (the one that writes tool
        calls' arguments, when the sidecar asked for it)."""

    @property
    def _info(self) -> dict[str, Any]:
        loaded = self._slots.get(MAIN)
        return loaded.info if loaded is not None else {}

    # ---- the stdin side ------------------------------------------------------------------------------------

    def read(self, stream: Any) -> None:
        for message in read_requests(stream):
            if isinstance(message, Cancel):
                self._cancelled.add(message.id)
            else:
                self._jobs.put(message)
        self._jobs.put(None)

    # ---- the job side ----------------------------------------------------------------------------------------

    def run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            job_id = job.id
            self._current = job_id
            try:
                if job.op == "load":
                    self.out.result(job_id, self.load(job.params, job_id))
                elif job.op == "generate":
                    self.out.result(job_id, self.generate(job.params, job_id))
                else:
                    self.out.error(job_id, "bad_request", "unknown op")
            except assets.ModelUnavailable as exc:
                self.out.error(job_id, "model_unavailable", str(exc))
            except ContextTooLong as exc:
                self.out.error(job_id, "context_length_exceeded", str(exc))
            except Exception as exc:  # the job failed; the worker goes on (the sidecar decides what to do)
                self.out.error(job_id, "runtime_error", f"{type(exc).__name__}: {exc}")
            finally:
                self._current = None
                self._cancelled.discard(job_id)

    def load(self, job: dict[str, Any], job_id: str) -> dict[str, Any]:
        t0 = time.perf_counter()
        root = Path(job["root"])
        last: dict[str, float] = {}

        def progress(stage: str, fraction: float) -> None:
            if fraction - last.get(stage, -1.0) >= 0.05 or fraction >= 1.0:
                last[stage] = fraction
                self.out.progress(job_id, stage, {"fraction": round(fraction, 3)})

        slot = ARGUMENTS if job.get("slot") == ARGUMENTS else MAIN
        path = job.get("path")
        prepared = None if path or not job.get("prepared") else Path(job["prepared"])
        files = None
        if prepared is not None:  # a packaged model, converted when the engines folder was built
            key = assets.ARGUMENTS_SHA256 if slot == ARGUMENTS else assets.PACKAGED_SHA256
        else:
            if path:
                files = assets.configured(Path(path), root, progress)
            elif slot == ARGUMENTS:
                files = assets.assemble_arguments_model(root, progress)
            else:
                files = assets.assemble(root, progress)
            key = files.sha256
        current = self._slots.get(slot)
        if current is not None and current.key == key:
            return {**current.info, "load_s": 0.0, "reused": True}
        self._slots.pop(slot, None)  # the old model's memory goes before the new one's comes
        if prepared is not None:
            folder, cost = prepared, {"cached": True, "prepared": True}
            if not (folder / convert.OV_MARKER).is_file():
                raise assets.ModelUnavailable(f"no converted model in {folder}")
            meta = _read_meta(folder, None)
        else:
            assert files is not None
            folder, cost = convert.ensure_converted(files, root, progress)
            meta = _read_meta(folder, files.gguf)
        import openvino_genai as ov_genai

        t1 = time.perf_counter()
        threads = job.get("threads")
        props: dict[str, Any] = {"INFERENCE_NUM_THREADS": int(threads)} if threads else {}
        if job.get("precision"):  # openvino's CPU default is bf16 where the CPU has it, f32 elsewhere
            props["INFERENCE_PRECISION_HINT"] = str(job["precision"])
        pipe = ov_genai.LLMPipeline(str(folder), "CPU", **props)
        info = {"sha256": key, "context_window": meta.get("context_window") or 8192, "meta": meta}
        self._slots[slot] = Loaded(pipe, pipe.get_tokenizer(), key, info)
        return {
            **info,
            "conversion": cost,
            "runtime_load_s": round(time.perf_counter() - t1, 3),
            "load_s": round(time.perf_counter() - t0, 3),
        }

    def generate(self, job: dict[str, Any], job_id: str) -> dict[str, Any]:
        loaded = self._slots.get(ARGUMENTS if job.get("slot") == ARGUMENTS else MAIN)
        if loaded is None:
            raise RuntimeError("no model is loaded")
        import openvino_genai as ov_genai

        tools = job.get("tools") or None
        tokenizer = loaded.tokenizer
        prompt = tokenizer.apply_chat_template(job["messages"], add_generation_prompt=True, tools=tools)
        prompt += str(job.get("prefix") or "")
        n_input = int(tokenizer.encode(prompt).input_ids.get_shape()[-1])
        window = int(loaded.info.get("context_window") or 8192)
        max_new = int(job.get("max_tokens") or 1024)
        if n_input >= window:
            raise ContextTooLong(f"the prompt has {n_input} tokens; the model's context window is {window}")
        max_new = min(max_new, window - n_input)
        config = ov_genai.GenerationConfig(max_new_tokens=max_new, apply_chat_template=False)
        temperature = job.get("temperature")
        if temperature:
            config.do_sample = True
            config.temperature = float(temperature)
            if job.get("top_p") is not None:
                config.top_p = float(job["top_p"])
        if job.get("stop"):
            config.stop_strings = set(job["stop"])
        if job.get("json_schema") is not None:
            grammar = compact_grammar(job["json_schema"])  # no whitespace loops, no endless numbers; else the schema
            config.structured_output_config = (
                ov_genai.StructuredOutputConfig(grammar=grammar)
                if grammar is not None
                else ov_genai.StructuredOutputConfig(json_schema=json.dumps(job["json_schema"]))
            )
        elif job.get("regex"):
            config.structured_output_config = ov_genai.StructuredOutputConfig(regex=str(job["regex"]))
        if job.get("score"):
            config.logprobs = 1
        cancelled = looped = False
        guard = LoopGuard(arguments=job.get("json_schema") is not None) if job.get("stop_on_loop") else None
        first: list[float] = []
        t0 = time.perf_counter()

        def on_text(text: str) -> Any:
            nonlocal cancelled, looped
            if text:
                if not first:
                    first.append(time.perf_counter())
                self.out.delta(job_id, text)
            if job_id in self._cancelled:
                cancelled = True
                return ov_genai.StreamingStatus.STOP
            if guard is not None and text and guard.feed(text):
                looped = True
                return ov_genai.StreamingStatus.STOP
            return ov_genai.StreamingStatus.RUNNING

        if job_id in self._cancelled:
            return {"cancelled": True, "input_tokens": n_input, "output_tokens": 0, "finish": "stop"}
        result = loaded.pipe.generate([prompt], config, on_text)
        metrics = result.perf_metrics
        n_out = int(metrics.get_num_generated_tokens())
        elapsed = time.perf_counter() - t0
        scores = list(result.scores) if job.get("score") else []
        return {
            **({"score": float(scores[0])} if scores else {}),
            "cancelled": cancelled,
            "input_tokens": int(metrics.get_num_input_tokens()) or n_input,
            "output_tokens": n_out,
            "finish": "loop" if looped else "length" if n_out >= max_new and not cancelled else "stop",
            "ttft_ms": round(float(metrics.get_ttft().mean), 1),
            "tokens_per_s": round(float(metrics.get_throughput().mean), 2),
            "generate_s": round(elapsed, 3),
        }


class ContextTooLong(Exception):
    pass


MAIN, ARGUMENTS = assets.MAIN_SLOT, assets.ARGUMENTS_SLOT


class Loaded(NamedTuple):
    pipe: Any
    tokenizer: Any
    key: str
    """The sha256 of the model's GGUF (a new file never reuses a loaded model)."""
    info: dict[str, Any]


def _read_meta(folder: Path, gguf_path: Path | None) -> dict[str, Any]:
    """The GGUF's context window and name, read once and kept beside the converted model (a prepared model without
    its GGUF has only what was kept)."""
    meta_path = folder / META_FILE
    try:
        return json.loads(meta_path.read_text())
    except (OSError, ValueError) as exc:
        if gguf_path is None:
            return {"error": f"no {META_FILE} beside the prepared model: {exc}"}
    try:
        meta = assets.gguf_metadata(gguf_path)
    except (OSError, ValueError) as exc:  # informative only: a model without it gets the conservative window
        meta = {"error": str(exc)}
    tmp = meta_path.with_name(META_FILE + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, meta_path)
    return meta


def _exit() -> None:
    """Leave now, and take every process of our group with us: a library may have forked a helper (seen once: a
    fork of the worker, never exec'd, left behind when the sidecar was SIGKILLed). Only when we lead our own group
    (as the sidecar starts us), never the group of a shell that ran us by hand."""
    if os.name == "posix" and os.getpgrp() == os.getpid():
        with contextlib.suppress(OSError):
            os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(0)


def main() -> None:
    convert.block_telemetry()
    worker = Worker(WorkerOutput(claim_stdout()))  # stdout is the protocol: libraries that print go to stderr
    exit_with_parent(_exit)  # the sidecar died (even by SIGKILL): never outlive it
    reader = threading.Thread(target=worker.read, args=(sys.stdin,), daemon=True)
    reader.start()
    worker.out.hello("local-model", os.getpid())
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    reader.join()  # stdin closed: the sidecar is gone or done with us
    _exit()


if __name__ == "__main__":
    main()
