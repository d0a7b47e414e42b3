"""Events that reached bronze after their window was published: how many wait, where.

A published batch slice was computed from one bronze version (its rows' lineage column
``bronze_version``; a full reprocess's build included). An event whose window is published
but which bronze took in a later commit is in no answer: the speed layer dropped it as too
late, and the batch layer has not recomputed the window since. ``LateArrivals.waiting``
finds those rows per view and window without scanning bronze:

1. the commits since the previous look are read from bronze's log (``lake.bronze_log``):
   the files each added, with their event-time range from the writer's statistics (a file
   without them is taken to overlap every window; commits that left the log with its
   retention are stood in for by the live files they added, dated as late as they can
   be). A file is *late* while its range overlaps a window published from an older bronze
   version than the file's;
2. a window published anew since the previous look (a scheduled run, a backfill, a
   restatement, a full reprocess) is checked against the commits after its new version
   up to the previous look's: a run pins its bronze version at its bronze gate, so
   commits made while it ran are late for it;
3. only the late files are read (three columns each): their rows of the view's event
   types in windows published from an older version are the rows waiting, per window,
   with their distinct event ids.

The scan position, each view's published windows and the late files are kept in
``<state dir>/status/late-arrivals.json``, so a look costs the commits made since the
previous one and the few files that hold late events, whatever bronze's size. A duplicate
of an event already counted is a row waiting too: recomputing its window changes nothing,
and the count goes back to zero.

Looks take turns (a lock file beside the state), and each saves its answer with the time
it looked in ``late-rows-waiting.json``. ``LateArrivals.recent`` answers from that newest
look of any process, so the query API's workers all report the same counts, and a look the
restatement DAG made serves them too.
"""

from __future__ import annotations

import bisect
import fcntl
import json
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

from lambdalake.batch.publication import read_publications
from lambdalake.jsonfile import replace_json
from lambdalake.lake.bronze import BRONZE_TABLE
from lambdalake.lake.bronze_log import AddedFile, files_added
from lambdalake.lake.delta_rs import arrow_filesystem, delta_rs_uri, table_exists, table_version
from lambdalake.settings import Settings
from lambdalake.timeutil import as_utc, from_epoch_microseconds, parse_utc
from lambdalake.views.catalog import current_table_path
from lambdalake.views.definition import ViewDefinition

STATE_FILE = "late-arrivals.json"
WRITE_TO_COMMIT = timedelta(minutes=10)
"""Longer than any file of bronze waits between its write and its commit: a file written
that long before a look was in a commit the look read."""
ANSWER_FILE = "late-rows-waiting.json"
LOCK_FILE = "late-arrivals.lock"


@dataclass(frozen=True)
class WaitingWindow:
    """One published window of a view with bronze rows its slice does not include."""

    window_start: datetime
    rows: int              # bronze rows that arrived after the slice's bronze version
    events: int            # their distinct event ids
    computed_from: int     # the bronze version the published slice read
    waiting_since: datetime | None = field(default=None, compare=False)
    """When the first of its rows reached bronze (None: the writer did not say)."""
    own: tuple[int, int] | None = None
    """Hopping windows: (rows, events) of those whose newest waiting window this is. A late
    row is missing from every window it is in, but is this one's own in one only, so own
    counts add up over windows and intervals (None: tumbling, where they are ``rows`` and
    ``events``)."""

    @property
    def own_rows(self) -> int:
        return self.rows if self.own is None else self.own[0]

    @property
    def own_events(self) -> int:
        return self.events if self.own is None else self.own[1]


@dataclass(frozen=True)
class Waiting:
    """What waits for restatement in one view: its windows, oldest first."""

    view: str
    windows: list[WaitingWindow]

    @property
    def rows(self) -> int:
        """Its late rows, each once (in hopping windows, a row is in several)."""
        return sum(w.own_rows for w in self.windows)

    @property
    def events(self) -> int:
        return sum(w.own_events for w in self.windows)

    @property
    def oldest(self) -> datetime | None:
        return self.windows[0].window_start if self.windows else None

    @property
    def waiting_since(self) -> datetime | None:
        """When the longest-waiting of its rows reached bronze."""
        return min((w.waiting_since for w in self.windows if w.waiting_since), default=None)


def published_from(settings: Settings, view: ViewDefinition) -> dict[datetime, int]:
    """Every published window of ``view`` with the bronze version its slice read: the
    smallest lineage version among the window's rows in the current view table, or, for a
    window without rows, the newest bronze version a publication covering it read (a
    publish never replaces what a newer one published: ``staging.promote``). The lineage comes
    from the table's file statistics (view tables are partitioned by window), so no data
    file is read."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    slide = timedelta(seconds=view.slide_seconds)  # a window starts every slide
    versions: dict[datetime, int] = {}
    for row in sorted(read_publications(settings),
                      key=lambda r: (r["bronze_version"], r["published_at"])):
        if row["view"] == view.name:
            window = row["interval_start"]
            while window < row["interval_end"]:
                versions[window] = int(row["bronze_version"])
                window += slide
    uri = delta_rs_uri(current_table_path(settings, view.name))
    if not versions or not DeltaTable.is_deltatable(uri):
        return versions
    files = pa.table(DeltaTable(uri).get_add_actions(flatten=True))
    if "min.bronze_version" not in files.column_names or files["min.bronze_version"].null_count:
        files = pa.table(DeltaTable(uri).to_pyarrow_table(  # no statistics: read the column
            columns=["window_start", "bronze_version"])).rename_columns(
            ["partition.window_start", "min.bronze_version"])
    lineage = files.group_by("partition.window_start").aggregate(
        [("min.bronze_version", "min")])
    for start, version in zip(lineage.column("partition.window_start").to_pylist(),
                              pc.cast(lineage.column("min.bronze_version_min"), pa.int64())
                              .to_pylist(), strict=True):
        window = as_utc(start, naive_is_utc=True)
        if window in versions:
            versions[window] = int(version)
    return versions


class LateArrivals:
    """Looks for events that arrived after their window was published (see the module)."""

    def __init__(self, settings: Settings, views: list[ViewDefinition]) -> None:
        self.settings = settings
        self.views = views
        self.bronze = settings.table_path(BRONZE_TABLE)
        self.state_file = settings.state_dir / "status" / STATE_FILE
        self.answer_file = self.state_file.with_name(ANSWER_FILE)
        self._parsed: tuple[tuple[int, int, int], dict[str, tuple[float, Waiting]]] | None = None

    def recent(self, max_age_seconds: float) -> list[Waiting]:
        """The answer of the newest look any process made, looked at again only when it is
        older than ``max_age_seconds``: the API's ``/freshness`` is polled far more often (a
        benchmark polls it every 50 ms) than late rows change, and a look costs about 0.1 s.
        Sharing the look keeps the API's workers from contradicting each other."""
        answer = self._answer_of_last_look(max_age_seconds)
        if answer is None:
            with self._turn():  # another process may have looked while this one waited
                answer = self._answer_of_last_look(max_age_seconds)
                if answer is None:
                    answer = self._look()
        return answer

    def waiting(self) -> list[Waiting]:
        """Per view, the published windows with rows waiting, oldest first."""
        with self._turn():
            return self._look()

    @contextmanager
    def _turn(self) -> Iterator[None]:
        """Holds the look's lock: looks of all processes and threads take turns, so each
        starts from the previous one's state and no older answer replaces a newer one."""
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.state_file.with_name(LOCK_FILE), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _look(self) -> list[Waiting]:
        if not table_exists(self.bronze):
            answer = [Waiting(view.name, []) for view in self.views]
            self._save_answer(answer)
            return answer
        newest = table_version(self.bronze)
        looked_at = datetime.now(UTC)
        scanned, before, late, known_by = self._load()
        published = {view.name: published_from(self.settings, view) for view in self.views}
        anew = [version for view in self.views
                for window, version in published[view.name].items()
                if before.get(view.name, {}).get(window) != version and version < scanned]
        files = {(f.version, f.path): f for f in late}
        if anew:  # commits a run made while it ran, up to the previous look
            files |= {(f.version, f.path): f for f in files_added(self.bronze, min(anew), scanned)}
        files |= {(f.version, f.path): f
                  for f in files_added(self.bronze, scanned, newest, known_by)}
        indexes = {view.name: _PublishedWindows(view, published[view.name])
                   for view in self.views}
        late = [file for file in files.values()
                if any(index.late_for(file) for index in indexes.values())]
        self._save(newest, published, late, looked_at)
        answer = [self._count(view, indexes[view.name], late) for view in self.views]
        self._save_answer(answer)
        return answer

    def last_answer(self) -> dict[str, Waiting]:
        """The newest look's answer per view, however old, without looking (what the query
        API marks its batch rows from on every snapshot); empty before the first look."""
        return {view: answer for view, (_, answer) in self._saved_answers().items()}

    def _saved_answers(self) -> dict[str, tuple[float, Waiting]]:
        """Per view, when the newest look was and its answer (the file is parsed again only
        when it was replaced)."""
        try:
            stat = self.answer_file.stat()
            identity = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
            if self._parsed is None or self._parsed[0] != identity:
                saved = json.loads(self.answer_file.read_text())
                self._parsed = (identity, {
                    view: (float(answer["looked_at"]),
                           Waiting(view, [_window(w) for w in answer["windows"]]))
                    for view, answer in saved.items()})
        except (FileNotFoundError, ValueError, KeyError, TypeError):  # none yet, or unreadable
            return {}
        return self._parsed[1]

    def _answer_of_last_look(self, max_age_seconds: float) -> list[Waiting] | None:
        """The saved answer for these views if every view's is at most ``max_age_seconds``
        old."""
        answers = self._saved_answers()
        oldest = time.time() - max_age_seconds
        if any(answers.get(view.name, (-1.0,))[0] < oldest for view in self.views):
            return None
        return [answers[view.name][1] for view in self.views]

    def _save_answer(self, answer: list[Waiting]) -> None:
        """Writes this look's answer per view beside the state (a look of fewer views
        keeps the others' answers as they were)."""
        try:
            saved = json.loads(self.answer_file.read_text())
        except (FileNotFoundError, ValueError):
            saved = {}
        looked_at = time.time()
        saved |= {w.view: {"looked_at": looked_at,
                           "windows": [_plain(window) for window in w.windows]}
                  for w in answer}
        replace_json(self.answer_file, saved)

    def _count(self, view: ViewDefinition, published: _PublishedWindows,
               late: list[AddedFile]) -> Waiting:
        """The rows of the ``late`` files in windows published from an older version."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        rows: dict[datetime, int] = defaultdict(int)
        events: dict[datetime, set[str]] = defaultdict(set)
        own_rows: dict[datetime, int] = defaultdict(int)
        own_events: dict[datetime, set[str]] = defaultdict(set)
        since: dict[datetime, datetime] = {}
        filesystem, root = arrow_filesystem(self.bronze)
        for file in late:
            windows = published.late_for(file)
            if not windows:
                continue
            table = pq.read_table(f"{root}/{unquote(file.path)}", filesystem=filesystem,
                                  columns=["event_id", "event_type", "occurred_at"])
            table = table.filter(pc.is_in(table["event_type"], pa.array(view.event_types)))
            moments = table["occurred_at"].cast(pa.timestamp("us")).cast(pa.int64())
            for moment, event_id in zip(moments.to_pylist(), table["event_id"].to_pylist(),
                                        strict=True):
                reached = [window for start in view.window_starts(moment)  # newest first
                           if (window := from_epoch_microseconds(start)) in windows]
                if reached:
                    own_rows[reached[0]] += 1
                    own_events[reached[0]].add(event_id)
                for window in reached:  # a row is missing from each of its (hopping) windows
                    rows[window] += 1
                    events[window].add(event_id)
                    if file.arrived_at and (window not in since
                                            or file.arrived_at < since[window]):
                        since[window] = file.arrived_at
        hopping = view.windows_per_event > 1
        return Waiting(view.name, [
            WaitingWindow(start, rows[start], len(events[start]), published.versions[start],
                          since.get(start),
                          (own_rows[start], len(own_events[start])) if hopping else None)
            for start in sorted(rows)])

    def _load(self) -> tuple[int, dict[str, dict[datetime, int]], list[AddedFile],
                             datetime | None]:
        """The previous look: its bronze version, published windows and late files, and by
        when every file it read was written (its time less ``WRITE_TO_COMMIT``; None: none)."""
        try:
            state = json.loads(self.state_file.read_text())
        except (FileNotFoundError, ValueError):  # none yet, or unreadable: look from the start
            return -1, {}, [], None
        published = {view: {parse_utc(window): int(version) for window, version in windows}
                     for view, windows in state["published"].items()}
        late = [AddedFile(f["version"], f["path"], f["rows"],
                          *(parse_utc(f[key]) if f.get(key) else None
                            for key in ("first_event", "last_event", "arrived_at")))
                for f in state["late"]]
        looked_at = state.get("looked_at")
        known_by = parse_utc(looked_at) - WRITE_TO_COMMIT if looked_at else None
        return int(state["scanned_through"]), published, late, known_by

    def _save(self, scanned_through: int, published: dict[str, dict[datetime, int]],
              late: list[AddedFile], looked_at: datetime) -> None:
        replace_json(self.state_file, {
            "scanned_through": scanned_through, "looked_at": looked_at.isoformat(),
            "published": {view: [[window.isoformat(), version]
                                 for window, version in sorted(windows.items())]
                          for view, windows in published.items()},
            "late": [_plain(file) for file in late]})


class _PublishedWindows:
    """A view's published windows, sorted, to find those a file's event times overlap."""

    def __init__(self, view: ViewDefinition, versions: dict[datetime, int]) -> None:
        self.versions = versions
        self.starts = sorted(versions)
        self.grain = timedelta(seconds=view.grain_seconds)

    def late_for(self, file: AddedFile) -> set[datetime]:
        """The windows ``file``'s event-time range overlaps whose slice read an older bronze
        version (a file without statistics overlaps every window)."""
        if file.first_event is None or file.last_event is None:
            overlapping = self.starts
        else:
            low = bisect.bisect_right(self.starts, file.first_event - self.grain)
            high = bisect.bisect_right(self.starts, file.last_event)
            overlapping = self.starts[low:high]
        return {window for window in overlapping if self.versions[window] < file.version}


def _plain(record: AddedFile | WaitingWindow) -> dict[str, Any]:
    return {key: value.isoformat() if isinstance(value, datetime) else value
            for key, value in asdict(record).items()}


def _window(saved: dict[str, Any]) -> WaitingWindow:
    return WaitingWindow(parse_utc(saved["window_start"]), int(saved["rows"]),
                         int(saved["events"]), int(saved["computed_from"]),
                         parse_utc(saved["waiting_since"]) if saved["waiting_since"] else None,
                         (int(saved["own"][0]), int(saved["own"][1])) if saved.get("own")
                         else None)
