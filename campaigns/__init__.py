"""The domain: contacts import, phone normalisation, audiences, message rendering,
campaign lifecycle, webhook event application and reports."""
