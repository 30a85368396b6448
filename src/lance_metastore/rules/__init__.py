"""The leaf rules every layer shares, written once: identifiers, configuration, locations,
secret redaction, error codes and phrases, request shapes, paging, retries, schema mapping,
catalog entry records, version keys, Lance manifests and bulk registration.

Nothing here imports from the rest of :mod:`lance_metastore`; every other package imports
from here.
"""
