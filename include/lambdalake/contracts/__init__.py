"""Event and entity contracts: one JSON Schema file per event type or entity
(``registry``), and the checks of one flat record against such a contract
(``record_checks``). Every layer reads them; they import only the settings."""
