"""The SQL core: the store's engine-neutral code, written once for every SQL adapter.

Statements are written with `?` placeholders; a `Dialect` (ys.store.sql.dialect) says what
really differs between engines (locking clauses, the placeholder a driver wants). The pure
parts live here too: rows read into records and written from them (`rows`), the events a
write builds (`events`), a step's save (`steps`), list pages (`lists`), a retry's checks
(`retrying`), schedule rows (`schedule_rows`) and the group writer's request (`requests`).
An adapter (ys/store/sqlite, ys/store/postgres) keeps its connection, its writer's
transaction discipline, its schema and migrations, and the few statements that truly differ.
"""
