"""Staff rights over tenants: the four ``Tenant`` permissions and the tenant-by-tenant grants (``TenantGrant``)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('tenants', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='tenant',
            options={'ordering': ['slug'], 'permissions': [('read_conversations', 'Can read the conversations of every tenant'), ('manage_conversations', 'Can end and clear the conversations of every tenant'), ('act_for_tenant', 'Can chat as every tenant (API, WebSocket, chat page, multi-agent preview)'), ('debug_tenant', 'Can use the debug routes (route debug, MCP tools) for every tenant')]},
        ),
        migrations.CreateModel(
            name='TenantGrant',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('read_conversations', models.BooleanField(default=False, help_text="Read this tenant's conversations.")),
                ('manage_conversations', models.BooleanField(default=False, help_text="End and clear this tenant's conversations.")),
                ('act_for_tenant', models.BooleanField(default=False, help_text='Chat as this tenant: API, WebSocket, chat page, multi-agent preview.')),
                ('debug_tenant', models.BooleanField(default=False, help_text='Debug routes: the routing decision for this tenant, MCP tools list and call.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('group', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='tenant_grants', to='auth.group')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='grants', to='tenants.tenant')),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='tenant_grants', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'tenant grant',
                'ordering': ['tenant', 'id'],
                'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('group__isnull', True), ('user__isnull', False)), models.Q(('group__isnull', False), ('user__isnull', True)), _connector='OR'), name='tenantgrant_user_xor_group', violation_error_message='A grant is for a user or for a group (exactly one).'), models.UniqueConstraint(condition=models.Q(('user__isnull', False)), fields=('tenant', 'user'), name='tenantgrant_one_per_user'), models.UniqueConstraint(condition=models.Q(('group__isnull', False)), fields=('tenant', 'group'), name='tenantgrant_one_per_group')],
            },
        ),
    ]
