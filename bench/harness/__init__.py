"""What every benchmark and diagnostic shares: results, baselines, resource sampling and
fresh runs (``common``), and the charts (``plots``)."""
