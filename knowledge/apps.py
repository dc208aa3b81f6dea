from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "knowledge"
    verbose_name = "Knowledge"

    def ready(self) -> None:
        from common.config_version import config_models_watch
        from knowledge.models import KnowledgeDocument, KnowledgeSource

        # Which profiles hold knowledge is kept per configuration version (knowledge.retrieval.knowledge_held): every
        # write of a source or a document (an upload, a replacement, a delete, a source switched off) bumps it.
        config_models_watch(KnowledgeSource, KnowledgeDocument)
