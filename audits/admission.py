"""Node admission: the GPU facts a box must show before it joins, from its hardware model.

The contract's `gpus` gives the count, the model, `nvlinks_per_gpu` and `max_corrected_ecc`.
Drift (kind `gpu`) is: a GPU count or model other than planned; a GPU with fewer (or more)
active NVLinks than the model's link count; corrected ECC errors above the limit (warning) or
ECC counters not readable (warning); any uncorrected ECC error; any Xid in the kernel log.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from audits.sink import Facts, Sink
from contract import Host, Severity


def gpus(c: Host, facts: Facts, sink: Sink) -> None:
    """Check the GPU admission facts of a host with GPUs."""
    plan = c.gpus
    if plan is None:
        return  # the check applies to hosts with GPUs only
    listed = facts["nvidia_smi_gpus"]
    if len(listed) != plan.count:
        text = f"nvidia-smi lists {len(listed)} GPUs, planned {plan.count}"
        sink.drift("gpus.count", plan.count, len(listed), Severity.CRITICAL, text)
    models = sorted({g["name"] for g in listed} - {plan.model})
    if models:
        text = f"GPU model {', '.join(models)}, planned {plan.model}"
        sink.drift("gpus.model", plan.model, models, Severity.CRITICAL, text)
    for gpu in facts["nvidia_smi_nvlink"]:
        active = sum(1 for link in gpu["links"] if link["active"])
        if active != plan.nvlinks_per_gpu:
            text = f"GPU {gpu['index']}: {active} of {plan.nvlinks_per_gpu} NVLinks active"
            sink.drift(
                f"gpus[{gpu['index']}].nvlinks",
                plan.nvlinks_per_gpu,
                active,
                Severity.CRITICAL,
                text,
            )
    for gpu in facts["nvidia_smi_ecc"]:
        _ecc(sink, gpu, plan.max_corrected_ecc)
    events: dict[tuple[str, int], list[str]] = defaultdict(list)
    for event in facts["xid"]:
        events[(event["pci"], event["xid"])].append(event["message"])
    for (pci, xid), messages in sorted(events.items()):
        observed = {"xid": xid, "count": len(messages), "message": messages[0]}
        text = f"Xid {xid} on {pci} ({len(messages)}x): {messages[0]}"
        sink.drift(f"xid[{pci}].{xid}", None, observed, Severity.CRITICAL, text)


def _ecc(sink: Sink, gpu: Mapping[str, Any], limit: int) -> None:
    index, corrected, uncorrected = gpu["index"], gpu["corrected"], gpu["uncorrected"]
    if corrected is None or uncorrected is None:
        text = f"GPU {index}: ECC counters not reported (ECC disabled?)"
        sink.drift(f"gpus[{index}].ecc", "enabled", None, Severity.WARNING, text)
        return
    if corrected > limit:
        text = f"GPU {index}: {corrected} corrected ECC errors, more than {limit}"
        sink.drift(f"gpus[{index}].ecc.corrected", limit, corrected, Severity.WARNING, text)
    if uncorrected:
        text = f"GPU {index}: {uncorrected} uncorrected ECC errors"
        sink.drift(f"gpus[{index}].ecc.uncorrected", 0, uncorrected, Severity.CRITICAL, text)
