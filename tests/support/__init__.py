"""What several test modules share: ground truth computed without the project's
aggregation code, the streaming crash helpers, threads whose failure fails the test,
small Delta tables for serving, the unit tier's settings (``settings_factory``)."""
