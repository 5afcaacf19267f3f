-- What a batched request held besides its events (Mews' EnterpriseId and IntegrationId,
-- Adyen's live), kept with each of its items so that each is handed downstream with it
-- on its own: the item alone does not say which enterprise or which account it is of.
-- '' for a delivery that came alone, and for the items stored before this version.
ALTER TABLE deliveries ADD COLUMN batch_envelope TEXT NOT NULL DEFAULT '';
