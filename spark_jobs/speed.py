"""Spark entry point of the speed layer: Kafka -> real-time views, until stopped.

    python spark_jobs/speed.py [--views page_traffic funnel] [--shard 1]
"""

import argparse

from lambdalake.settings import get_settings
from lambdalake.spark import STREAM_SPARK_CONF, get_spark
from lambdalake.speed.stream import run
from lambdalake.streaming.runner import log_to_stdout

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--views", nargs="+", help="views to maintain (default: all)")
    parser.add_argument("--shard", type=int, default=0,
                        help="which of the speed.shards instances this is (default: 0)")
    args = parser.parse_args()
    log_to_stdout()
    settings = get_settings()
    run(get_spark("speed", settings, STREAM_SPARK_CONF), settings, args.views, args.shard)
