"""The SQL core: the store written once, for every SQL adapter (docs/design.md, "Adding a SQL
adapter").

Statements are written with `?` placeholders; a `Dialect` (`dialect`) says what really
differs between engines, and every connection a body gets carries its dialect. The clients
(`execution_client`, `retries`, `starts`, `effects`, `values`, `schedules`, `reads`,
`overview`, `housekeeping`, `observing`) run their transaction bodies (`executions`,
`claims`, `concurrency`, `limits`, `handlers`, `versions`, `slots`) on a `Core` (`core`), and
`store.SqlStore` is all of them at once. The pure parts: rows read into records and written
from them (`rows`), the events a write builds (`events`), a step's save (`steps`), list pages
(`lists`), a retry's checks (`retrying`), schedule rows (`schedule_rows`) and the group
writer's request (`requests`). An adapter (ys/store/sqlite, ys/store/postgres) keeps its
connection, its writer's transaction discipline, its schema and migrations, its dialect and
the few statements that truly differ.
"""
