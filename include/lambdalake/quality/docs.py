"""GX Data Docs for every validation, viewable offline.

Each gate's GX validation result is rendered as its Data Docs page
(``lambdalake.quality.rendering``: GX's renderer, saying the platform's verdict) into
``<state dir>/quality/docs/runs/<page>.html``, and the suite it ran into
``expectations/<suite>.html`` beside it (the page links it). GX's templates
load Bootstrap, jQuery, Font Awesome, Vega and more from CDNs and cannot be overridden, so
every such URL is rewritten to a local copy under ``docs/assets/``; the copies are the same
package versions, fetched from the npm registry at setup (``vendor_assets``), like the JVM
jars. The query API's Swagger UI (``/docs``) loads its copies from the same directory. A
URL the table below does not know is refused when the page is written, so a GX upgrade
that adds an asset fails loudly instead of going online quietly.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lambdalake.quality.history import append, entry
from lambdalake.settings import Settings

if TYPE_CHECKING:
    from lambdalake.quality.verdict import GateResult

ASSETS_DIR = "assets"
RUNS_DIR = "runs"

SWAGGER_UI = "swagger-ui-dist@5.35.0"
"""The Swagger UI the query API's ``/docs`` page loads (FastAPI's default, from a CDN)."""

CDN_ASSETS: dict[str, tuple[str, str]] = {
    # CDN URL in GX's templates or FastAPI's /docs: (npm package spec, file in the package)
    "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js":
        (SWAGGER_UI, "swagger-ui-bundle.js"),
    "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css":
        (SWAGGER_UI, "swagger-ui.css"),
    "https://fastapi.tiangolo.com/img/favicon.png": (SWAGGER_UI, "favicon-32x32.png"),
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css":
        ("bootstrap@4.3.1", "dist/css/bootstrap.min.css"),
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js":
        ("bootstrap@4.3.1", "dist/js/bootstrap.min.js"),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css":
        ("bootstrap-table@1.19.1", "dist/bootstrap-table.min.css"),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js":
        ("bootstrap-table@1.19.1", "dist/bootstrap-table.min.js"),
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/"
    "bootstrap-table-filter-control.css":
        ("bootstrap-table@1.19.0", "dist/extensions/filter-control/"
                                   "bootstrap-table-filter-control.css"),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/"
    "bootstrap-table-filter-control.min.js":
        ("bootstrap-table@1.19.1", "dist/extensions/filter-control/"
                                   "bootstrap-table-filter-control.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/"
    "bootstrap-datepicker.min.css":
        ("bootstrap-datepicker@1.9.0", "dist/css/bootstrap-datepicker.min.css"),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/"
    "bootstrap-datepicker.min.js":
        ("bootstrap-datepicker@1.9.0", "dist/js/bootstrap-datepicker.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css":
        ("@fortawesome/fontawesome-free@6.6.0", "css/all.min.css"),
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js":
        ("popper.js@1.12.9", "dist/umd/popper.min.js"),
    "https://code.jquery.com/jquery-3.7.1.min.js": ("jquery@3.7.1", "dist/jquery.min.js"),
    "https://cdn.jsdelivr.net/npm/vega@5": ("vega@5", "build/vega.min.js"),
    "https://cdn.jsdelivr.net/npm/vega-lite@5": ("vega-lite@5", "build/vega-lite.min.js"),
    "https://cdn.jsdelivr.net/npm/vega-embed@6": ("vega-embed@6", "build/vega-embed.min.js"),
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/"
    "bootstrap-prefers-dark.css":
        ("@forevolve/bootstrap-dark@1.1.0", "dist/css/bootstrap-prefers-dark.css"),
}
EXTRA_FILES = {"@fortawesome/fontawesome-free@6.6.0": ["webfonts/"]}
"""Files an asset loads by relative URL (Font Awesome's CSS loads its web fonts)."""

_LOADED_URL = re.compile(r'(?P<attr>src|href)="(?P<url>https?://[^"]+)"')
_INTEGRITY = re.compile(r'\s(?:integrity|crossorigin)="[^"]*"')
_GX_LOGO = re.compile(r'<img[^>]*great-expectations-web-assets[^>]*>')


def docs_dir(settings: Settings) -> Path:
    return settings.state_dir / "quality" / "docs"


def local_name(spec: str, path: str) -> str:
    """Where a package file lives under ``assets/``: ``bootstrap@4.3.1/dist/css/...``."""
    return f"{spec.replace('/', '__')}/{path}"


def vendor_assets(settings: Settings) -> Path:
    """Fetch every asset of ``CDN_ASSETS`` from the npm registry into the shared assets dir
    (``settings.web_assets_dir``), once: a second run finds them and does nothing."""
    target = settings.web_assets_dir
    assert target is not None
    wanted: dict[str, list[str]] = {}
    for spec, path in CDN_ASSETS.values():
        wanted.setdefault(spec, []).append(path)
    for spec, extra in EXTRA_FILES.items():
        wanted[spec] += extra
    missing = {spec: paths for spec, paths in wanted.items()
               if not all((target / local_name(spec, p)).exists() for p in paths)}
    for spec, paths in missing.items():
        _unpack(spec, paths, target / spec.replace("/", "__"))
    return target


def _unpack(spec: str, paths: list[str], into: Path) -> None:
    """``npm pack`` one package (no dependencies, no install scripts) and keep ``paths``."""
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(["npm", "pack", spec, "--silent", "--pack-destination", scratch],
                              capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"npm pack {spec} failed: {done.stderr.strip()[-500:]}")
        tarball = next(Path(scratch).glob("*.tgz"))
        staging = into.with_name(into.name + ".staging")
        shutil.rmtree(staging, ignore_errors=True)
        with tarfile.open(tarball) as archive:
            for member in archive.getmembers():
                inside = member.name.removeprefix("package/")
                if member.isfile() and any(inside == p or (p.endswith("/") and
                                                           inside.startswith(p))
                                           for p in paths):
                    member.name = inside
                    archive.extract(member, staging, filter="data")
        missing = [p for p in paths if not (staging / p).exists()]
        if missing:
            raise RuntimeError(f"{spec} has no {missing}")
        shutil.rmtree(into, ignore_errors=True)
        staging.rename(into)


def offline_html(html: str, assets_prefix: str) -> str:
    """``html`` with every CDN URL pointing at its local copy under ``assets_prefix``.

    Raises ``ValueError`` for a loaded URL the table does not know (nothing goes online)."""
    html = _GX_LOGO.sub('<span class="h4 text-muted">Great Expectations</span>', html)
    html = _INTEGRITY.sub("", html)

    def local(match: re.Match[str]) -> str:
        url = match.group("url")
        if match.group("attr") == "href" and url not in CDN_ASSETS:
            return match.group(0)  # a link the reader may follow, not an asset the page loads
        if url not in CDN_ASSETS:
            raise ValueError(f"Data Docs page loads {url}, which is not vendored")
        spec, path = CDN_ASSETS[url]
        return f'{match.group("attr")}="{assets_prefix}/{local_name(spec, path)}"'

    return _LOADED_URL.sub(local, html)


def page_name(result: dict[str, Any]) -> str:
    """A file name for one recorded gate result: layer, subject, interval, record time."""
    raw = f"{result['layer']}-{result['subject']}-{result['start']}-{result['recorded_at']}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", raw) + ".html"


def write_page(settings: Settings, validation: Any, name: str, entry: dict[str, Any], *,
               asset: str, run_name: str, run_time: str) -> Path:
    """Write a GX validation result's Data Docs page (``rendering.validation_page``, for
    ``entry``, its recorded result) and its suite's page, offline; return the page."""
    from lambdalake.quality.rendering import suite_page, suite_page_path, validation_page

    root = docs_dir(settings)
    assets = root / ASSETS_DIR
    if not assets.exists():
        assets.parent.mkdir(parents=True, exist_ok=True)
        assert settings.web_assets_dir is not None
        assets.symlink_to(settings.web_assets_dir, target_is_directory=True)
    pages = {root / RUNS_DIR / name: validation_page(validation, entry, asset=asset,
                                                     run_name=run_name, run_time=run_time),
             root / suite_page_path(validation.suite_name): suite_page(validation)}
    for path, html in pages.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(offline_html(html, f"../{ASSETS_DIR}"), encoding="utf-8")
    return root / RUNS_DIR / name


def record_with_pages(results: Sequence[GateResult], settings: Settings, **context: Any) -> str:
    """Record ``results`` (and ``context``) in the quality history in one commit, each with
    its Data Docs page written first and named in its entry (``docs``, relative to the docs
    dir). A page that cannot be written is noted (``docs_error``): the verdict is recorded
    either way."""
    entries = [entry(result, **context) for result in results]
    for result, kept in zip(results, entries, strict=True):
        if result.validation is None:
            continue
        try:
            name = page_name(kept)
            write_page(settings, result.validation, name, kept,
                       asset=f"{result.layer} {result.subject} {result.interval} UTC",
                       run_name=str(context.get("run_id") or "(no run id)"),
                       run_time=kept["recorded_at"])
            kept["docs"] = f"{RUNS_DIR}/{name}"
        except Exception as error:  # noqa: BLE001 - a page that fails to render loses no result
            kept["docs_error"] = f"{type(error).__name__}: {error}"
    return append(settings, entries)
