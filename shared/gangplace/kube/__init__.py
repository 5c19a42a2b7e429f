"""The Kubernetes edge shared by the webhook and the descheduler."""
