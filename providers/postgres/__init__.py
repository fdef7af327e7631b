"""The PostgreSQL provider: roles, databases, grants, schemas, extensions and default
privileges on a real server.

* :mod:`lifecycle.providers.postgres.config`: the ProviderConfig reader, the admin
  session and error translation; :mod:`lifecycle.providers.postgres.connector`: the
  connector;
* :mod:`lifecycle.providers.postgres.role`, :mod:`lifecycle.providers.postgres.database`,
  :mod:`lifecycle.providers.postgres.grant`, :mod:`lifecycle.providers.postgres.schema`,
  :mod:`lifecycle.providers.postgres.extension`,
  :mod:`lifecycle.providers.postgres.default_privileges`: one small client per kind;
* :mod:`lifecycle.providers.postgres.policy`, :mod:`lifecycle.providers.postgres.tenancy`: the
  provider config's tenancy policy and the checks that enforce it;
* :mod:`lifecycle.providers.postgres.fields`, :mod:`lifecycle.providers.postgres.marks`:
  the spec field helpers and the ownership marks kept in comments;
* :mod:`lifecycle.providers.postgres.scram`: password verifiers as PostgreSQL stores them;
* :mod:`lifecycle.providers.postgres.login`: the password check by logging in;
* :mod:`lifecycle.providers.postgres.scenarios`: what is built on the provider, found
  through entry points: a throwaway server for tests and demos (``testing``), the crash
  explorer's targets on a real server (``verify``) and the ``lifecycle demo --provider
  postgres`` scenario (``demo``).

The kinds themselves (machines and ``Kind`` declarations) live in
:mod:`lifecycle.machines.postgres`.
"""
