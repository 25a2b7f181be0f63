from django.apps import AppConfig


class InterchangeConfig(AppConfig):
    name = "interchange"
    verbose_name = "Bundle import and export"
