"""TLS for the webhook: TLS 1.2 or newer only, certificates that rotate without a
restart, and a self-signed mode that makes its own CA. One job per module:

* :mod:`~webhook.tls.contexts` -- the server and client SSLContexts, and loading a
  certificate held in memory into a live one.
* :mod:`~webhook.tls.certificates` -- making the CA and the serving certificate for
  the Service's DNS names, and when to renew them.
* :mod:`~webhook.tls.ca_bundle` -- which CAs the MutatingWebhookConfiguration should
  trust, and the guarded patch that puts them into its ``caBundle``.
* :mod:`~webhook.tls.store` -- where a self-signed bundle lives: in this process, or in
  a Secret with its CA published to the webhook configuration.
* :mod:`~webhook.tls.rotation` -- the loops that keep the live context on the current
  certificate: mounted files reloaded, self-signed ones renewed.
"""
