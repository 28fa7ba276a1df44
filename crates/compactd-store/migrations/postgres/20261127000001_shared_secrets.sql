-- Secrets every replica shares, made once by the first to need one (the gateway's key for the
-- Codex compaction items it signs). Hex text, so both stores hold them alike.
create table shared_secrets (
    name text primary key,
    value text not null,
    created_at_ms bigint not null
);
