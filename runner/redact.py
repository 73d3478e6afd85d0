"""Keeps credentials out of everything a run writes: saved configs, Hydra's
.hydra/ files and logs."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

MASK = "***"
_SECRET_KEYS = re.compile(r"(secret|token|password|key|credential)", re.IGNORECASE)
# cache_credentials=..., +cache_credentials.key=..., dataset.storage_options.secret=...
_SECRET_ASSIGNMENT = re.compile(r"(cache_credentials[\w.]*|[\w.]*storage_options[\w.]*)=")
_VALUE_END = re.compile(r"[,\s]")  # an unbracketed override value's end
# user:password@ (or a token@) in a URI: http://user:pw@tracker:5000, s3://key:secret@bucket
_URI_USERINFO = re.compile(r"(\b[a-zA-Z][\w+.-]*://)[^/@\s]+@")


def redact(value, under_secret: bool = False):
    """A copy with every credential value masked: all of cache_credentials, and
    secret-looking keys of storage_options."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "cache_credentials" and item is not None:
                out[key] = MASK
            elif key == "storage_options":
                out[key] = redact(item, under_secret=True)
            elif under_secret and _SECRET_KEYS.search(str(key)) and not isinstance(item, dict):
                out[key] = MASK
            else:
                out[key] = redact(item, under_secret)
        return out
    if isinstance(value, list):
        return [redact(v, under_secret) for v in value]
    if isinstance(value, str):
        return redact_uri(_scrub_overrides(value))
    return value


def redact_uri(text: str) -> str:
    """The credentials of every URI in the text masked: scheme://***@host/..."""
    return _URI_USERINFO.sub(rf"\1{MASK}@", text)


def _scrub_overrides(text: str) -> str:
    """Masks the value of every `cache_credentials=...` / `...storage_options...=...`
    in an override string, or in a comma- or space-joined list of them
    (hydra.job.override_dirname, a trial's overrides). A value runs to its matching
    bracket, or to the next comma or space."""
    out, position = [], 0
    for match in _SECRET_ASSIGNMENT.finditer(text):
        if match.start() < position:
            continue
        end = match.end()
        if end < len(text) and text[end] in "{[":
            depth = 0
            for i in range(end, len(text)):
                depth += {"{": 1, "[": 1, "}": -1, "]": -1}.get(text[i], 0)
                if depth == 0:
                    end = i + 1
                    break
            else:
                end = len(text)
        else:
            stop = _VALUE_END.search(text, end)
            end = len(text) if stop is None else stop.start()
        out += [text[position : match.end()], MASK]
        position = end
    return "".join(out) + text[position:]


def redact_hydra_dir(hydra_dir: Path) -> None:
    """Rewrites .hydra/{config,hydra,overrides}.yaml with credentials masked."""
    for name in ("config.yaml", "hydra.yaml", "overrides.yaml"):
        path = hydra_dir / name
        if not path.exists():
            continue
        text = path.read_text()
        data = yaml.safe_load(text)
        masked = redact(data)
        if masked != data:
            path.write_text(yaml.safe_dump(masked, sort_keys=False))
