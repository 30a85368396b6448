"""The operations of the Lance namespace spec, written once for every catalog backend.

:mod:`.core` holds :class:`~.core.CatalogCore`, the catalog primitives a backend implements and
the helpers every operation shares. One module per subject (:mod:`.namespaces`, :mod:`.tables`,
:mod:`.versions`, :mod:`.lifecycle`, :mod:`.refs`, :mod:`.data`, :mod:`.indexes`,
:mod:`.batches`) holds the operations, written against ``CatalogCore`` only;
:mod:`.catalog` composes them into :class:`~.catalog.CatalogNamespace`, which a backend
subclasses.
"""
