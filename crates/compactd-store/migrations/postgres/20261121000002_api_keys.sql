-- API keys and tenants. A key is stored only as the SHA-256 of its text; every session belongs to
-- the tenant of the key that uploaded it ('' for anonymous uploads on a loopback listener).

create table api_keys (
    key_id         text collate "C" primary key,
    tenant         text not null,
    name           text,
    key_hash       text collate "C" not null,
    created_at_ms  bigint not null,
    revoked_at_ms  bigint,
    constraint api_keys_hash_key unique (key_hash)
);

alter table sessions add column tenant text collate "C" not null default '';
create index sessions_tenant_created_idx on sessions (tenant, created_at_ms, session_id);
