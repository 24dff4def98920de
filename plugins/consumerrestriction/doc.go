// Package consumerrestriction is APISIX's consumer-restriction plugin (priority 2400): a
// route admits or refuses a request by its consumer (type consumer_name, the default),
// its route's service (service_id) or its route (route_id), with a whitelist, a
// blacklist and allowed_by_methods. It runs after the authentication plugins, so the
// consumer is known (plugins.Ctx.Consumer); a request without the subject is a 401, a
// refused one rejected_code (403) with {"message": ...}. A consumer may carry it too: it
// then joins the route's chain once an auth plugin names that consumer.
package consumerrestriction
