"""Text for people: aligned tables and report documents (Markdown, HTML, terminal), one writer each,
and control characters from input shown as escapes (``printable``)."""
