-- The agent sessions being prepared now (issue 67), one row a session while its preparation
-- runs on any replica: a second replica does not start another, and a compaction that reaches
-- another replica meanwhile waits for it instead of starting over. A replica that dies mid-way
-- leaves its row until `expires_at_ms`.
create table preparing_sessions (
    tenant text not null,
    session_key text not null,
    expires_at_ms bigint not null,
    primary key (tenant, session_key)
);
