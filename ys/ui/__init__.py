"""The dashboard the daemon serves under /ui/ (`ys ui` forwards a local TCP port to it).

auth: one-time tokens, session cookies, CSRF. server: the routes, the gate in front of them
and the long polls that keep a page live. pages: what each page shows, read through the
store. render: Jinja2 and the filters the templates use (imported on the first page only, so
the daemon starts as fast as before). templates/ and static/ are the pages and their one
stylesheet, one script and the vendored htmx.
"""
