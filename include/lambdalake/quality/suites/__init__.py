"""Expectation suites as code, generated from the event contracts and the view definitions.

Nothing here is written per view or per event type: a new view, a new event type or a new
constraint in a contract changes the suites by itself. Five suites, a module each:
``bronze`` (a slice of ``bronze_events``), ``quarantine`` (a slice of
``quarantine_events``), ``view`` (a slice of a batch view), ``entity`` (an entity's
history) and ``realtime`` (recent rows of a real-time table); ``common`` holds what they
share: severities, suite parameters, derived columns and the rules derived from the
contracts. The suites are pure data (no Spark); ``lambdalake.quality.gate`` runs them.
"""
