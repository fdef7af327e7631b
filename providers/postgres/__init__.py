"""The PostgreSQL provider: roles, databases and grants on a real server.

* :mod:`providers.postgres.config`: the ProviderConfig reader, the admin
  session, error translation and the connector;
* :mod:`providers.postgres.role`, :mod:`providers.postgres.database`,
  :mod:`providers.postgres.grant`: one small client per kind;
* :mod:`providers.postgres.scram`: password verifiers as PostgreSQL stores them;
* :mod:`providers.postgres.testing`: a throwaway server for tests and demos;
* :mod:`providers.postgres.demo`: the ``lifecycle demo --provider postgres`` scenario.

The kinds themselves (machines and ``Kind`` declarations) live in
:mod:`machines.postgres`.
"""
