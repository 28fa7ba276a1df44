-- API keys and tenants (SQLite flavour of migrations/postgres).

create table api_keys (
    key_id         text primary key,
    tenant         text not null,
    name           text,
    key_hash       text not null,
    created_at_ms  integer not null,
    revoked_at_ms  integer,
    constraint api_keys_hash_key unique (key_hash)
);

alter table sessions add column tenant text not null default '';
create index sessions_tenant_created_idx on sessions (tenant, created_at_ms, session_id);
