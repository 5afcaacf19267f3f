-- Bulk actions: a release or reprocess of every key a filter matched. The keys are fixed
-- when the preview is made (bulk_action_keys), so that what runs is what was shown; each
-- key's outcome is written in the transaction that releases it, so that an action
-- resumed after a restart does no key twice.
CREATE TABLE bulk_actions (
    id               INTEGER PRIMARY KEY,
    kind             TEXT    NOT NULL,            -- release | reprocess
    filter           TEXT    NOT NULL,            -- the filter, as JSON
    reason           TEXT    NOT NULL,
    requested_by     TEXT    NOT NULL,
    state            TEXT    NOT NULL,            -- preview | pending_approval | queued | running | done | cancelled | refused
    total            INTEGER NOT NULL,            -- keys to act on
    money            TEXT    NOT NULL DEFAULT '[]', -- their amounts per currency, as JSON
    left_out         TEXT    NOT NULL DEFAULT '{}', -- keys the filter matched but the action cannot act on, by reason
    needs_approval   INTEGER NOT NULL DEFAULT 0,
    done             INTEGER NOT NULL DEFAULT 0,  -- keys with an outcome
    changed          INTEGER NOT NULL DEFAULT 0,
    unchanged        INTEGER NOT NULL DEFAULT 0,
    skipped          INTEGER NOT NULL DEFAULT 0,  -- changed since the preview: left alone
    refused          INTEGER NOT NULL DEFAULT 0,  -- in flight, gone, payload gone
    last_error       TEXT    NOT NULL DEFAULT '',
    decided_by       TEXT    NOT NULL DEFAULT '', -- who approved or refused
    decision_reason  TEXT    NOT NULL DEFAULT '',
    cancelled_by     TEXT    NOT NULL DEFAULT '',
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    runner           TEXT    NOT NULL DEFAULT '', -- the loop that holds it while running
    lease_until      INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    started_at       INTEGER NOT NULL DEFAULT 0,
    decided_at       INTEGER NOT NULL DEFAULT 0,
    finished_at      INTEGER NOT NULL DEFAULT 0,
    updated_at       INTEGER NOT NULL
);
CREATE INDEX bulk_actions_state ON bulk_actions (state, id);

CREATE TABLE bulk_action_keys (
    action     INTEGER NOT NULL REFERENCES bulk_actions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    claim      INTEGER NOT NULL,            -- the claim's id at the preview
    source     TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    state      TEXT    NOT NULL,            -- the claim's state at the preview
    updated_at INTEGER NOT NULL,            -- and when it entered it
    amount     TEXT    NOT NULL DEFAULT '', -- of the key's first delivery, in major units
    currency   TEXT    NOT NULL DEFAULT '',
    outcome    TEXT    NOT NULL DEFAULT '', -- '' until done: changed | unchanged | skipped | a refusal
    PRIMARY KEY (action, seq)
) WITHOUT ROWID;
