-- 030: a completion claim names the call that made it.
--
-- A claim is claimed=true once per (operation, consumer). When its answer was
-- lost (the connection dropped as the INSERT committed, a proxy cut the
-- reply), the caller's retry found the row and was told "already claimed: do
-- NOT act", by its own claim: nobody ever acted on the success. A caller may
-- now send a token of its choosing with the claim; a retry carrying the token
-- stored with the winning claim is answered claimed=true again (it is the same
-- claim), any other call false. A claim without a token keeps the old rule.
ALTER TABLE completion_claims ADD COLUMN claim_token text
    CHECK (claim_token IS NULL OR length(claim_token) BETWEEN 1 AND 200);
