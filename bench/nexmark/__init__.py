"""The Nexmark workload: an online auction's persons, auctions and bids as a domain of its
own (contracts in ``events/``, the queries as views in ``views/``), its generator and its
producer; ``bench.benchmarks.nexmark`` measures both layers on it."""
