"""Registers the batch DAG's timetable (``lambdalake.orchestration.schedule``): Airflow
deserializes a DAG's custom timetable only through a plugin, in every component that reads
the DAG (scheduler, api-server for the trigger form, dag-processor)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from lambdalake.orchestration.schedule import BatchIntervals


class LambdalakeSchedulePlugin(AirflowPlugin):
    name = "lambdalake_schedule"
    timetables = [BatchIntervals]
