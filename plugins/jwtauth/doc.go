// Package jwtauth is APISIX's jwt-auth: a request names its consumer by a JSON Web Token
// whose key claim ("key" unless key_claim_name says otherwise) is a consumer's jwt-auth
// key, signed with that consumer's secret (HS256/384/512) or the private half of its
// public_key (RS, PS, ES and EdDSA). The token comes from a header (Bearer or raw), the
// query or a cookie; its alg must be the consumer's algorithm, and its exp and nbf hold
// with the consumer's lifetime_grace_period as leeway. Every consumer's key is decoded
// once per snapshot into an index shared by every route (secrets base64-decoded, public
// keys parsed), so a request costs the token's parse and one signature check.
package jwtauth
