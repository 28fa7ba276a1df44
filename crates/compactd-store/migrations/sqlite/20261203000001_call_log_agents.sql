-- Every summary compactd serves says where it went (issue 55): the agent and the wire it came
-- by (`claude-code` on `anthropic-messages`, `pi` on `session`, …), the tokens of what it
-- replaced and of the summary (estimates), and what the fidelity gate found (its anchors and how
-- many the summary kept). Rows written before this migration have none of it.
alter table summarization_calls add column agent text not null default '';
alter table summarization_calls add column wire text not null default '';
alter table summarization_calls add column tokens_before bigint not null default 0;
alter table summarization_calls add column tokens_after bigint not null default 0;
alter table summarization_calls add column anchors bigint;
alter table summarization_calls add column anchors_kept bigint;
-- A tenant's calls, a page at a time, newest first (GET /v1/calls, the console's fleet page).
create index summarization_calls_tenant_id_idx on summarization_calls (tenant, call_id);
