"""The documentation site's own code: the reference pages generated from the code
(``reference``) and the mkdocs hooks (``hooks``). Nothing in ``lambdalake`` imports it."""
