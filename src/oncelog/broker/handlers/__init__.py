"""One module per Kafka API. Each declares ``API_KEY``, ``VERSIONS``, ``handle`` and
``error_response``; ``broker.dispatch`` lists them. Handlers translate between wire messages
and the state owners (``partition``, the coordinators, ``controller``); they hold no state of
their own and reach those owners only through ``ctx.services`` (``broker.services``), never
through the ``Broker``."""
