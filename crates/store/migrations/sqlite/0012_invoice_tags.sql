-- Invoice binding (CONTRACT "Rate limits and abuse"): the SPEC challenge asks for the package price
-- plus a tag below 0.01 of the stablecoin, distinct among the open invoices of a recipient and token,
-- so that one transfer can pay one invoice only. A tag is held from its invoice's creation until the
-- invoice is paid or some time after it expired; a held tag is not given to another invoice.
ALTER TABLE invoices ADD COLUMN tag_atomic INTEGER NOT NULL DEFAULT 0;
CREATE TABLE invoice_tags (
    recipient   TEXT NOT NULL,
    token       TEXT NOT NULL,
    tag         INTEGER NOT NULL,
    invoice_id  TEXT NOT NULL,
    open_until  INTEGER NOT NULL,
    PRIMARY KEY (recipient, token, tag)
);
